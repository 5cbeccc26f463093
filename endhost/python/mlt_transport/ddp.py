"""The DDP communication hook: each gradient bucket goes to the launched transport.

    state = mlt_transport.HookState(model)          # before wrapping, or ddp.module
    ddp.register_comm_hook(state, mlt_transport.allreduce_hook)
    for batch in data:
        ...; loss.backward(); optimizer.step()
        state.step(ddp.module)                       # re-syncs every K steps

The hook returns a future at once and a worker thread hands the bucket to the
transport, so the allreduce of one bucket overlaps the backward pass of the next.
"""

import os

import torch
import torch.distributed as dist

from .channel import Channel
from .client import TransportError

ENV_RESYNC = "MLT_RESYNC_EVERY"
DEFAULT_RESYNC_EVERY = 100


def layer_map(module, layers):
    """Parameter → layer index: the module's parameters in their order (front first)
    spread evenly over the `layers` the plan knows, so front parameters get the front
    layers' classes (MLT's priority by layer)."""
    params = [p for p in module.parameters() if p.requires_grad]
    count = max(1, len(params))
    return {id(p): i * max(1, layers) // count for i, p in enumerate(params)}


class HookState:
    """What the hook needs: the connection, the layer map, and replica safety.

    module: the model (its parameters' order is the layer map; pass `layer_of` to
    give it yourself: parameter name → layer). resync_every: re-synchronise the
    parameters exactly every K calls of `step` (default $MLT_RESYNC_EVERY, else 100;
    0: never) — with a loss bound above 0 the replicas' gradients, and so their
    parameters, may drift apart. transport: a `Transport` (default: the `mlt` process
    group's connection when that is the default group, else one on $MLT_SOCKET).
    """

    def __init__(self, module, resync_every=None, layer_of=None, transport=None, timeout=None):
        from .backend import default_channel

        shared = None if transport is not None else default_channel()
        self.channel = shared or Channel(transport, timeout=timeout)
        self._owns_channel = shared is None
        self.transport = self.channel.transport
        status = self.transport.status
        served = status["world_size"] * status["local_ranks"]
        self.world_size = dist.get_world_size() if dist.is_initialized() else served
        if self.world_size != served:
            raise TransportError(
                f"the process group has {self.world_size} ranks but the transport serves "
                f"{status['world_size']} hosts × {status['local_ranks']} processes "
                "(training.launcher.procs_per_host)"
            )
        if layer_of is None:
            self.layer_of = layer_map(module, status["layers"])
        else:
            named = dict(module.named_parameters())
            self.layer_of = {id(named[name]): layer for name, layer in layer_of.items()}
        if resync_every is None:
            resync_every = int(os.environ.get(ENV_RESYNC, DEFAULT_RESYNC_EVERY))
        self.resync_every = resync_every
        self.steps = 0
        # The largest parameter difference a re-sync corrected so far, and the last.
        self.max_drift = 0.0
        self.last_drift = None
        # The fraction delivered by the last bucket's allreduce, and the fraction of its
        # result no loss reached.
        self.delivered = 1.0
        self.exact = 1.0

    def __getstate__(self):
        raise TypeError("HookState holds a connection and cannot be pickled")

    def bucket_layers(self, bucket):
        """(first value, layer) breakpoints of a bucket's flat buffer."""
        out, at = [], 0
        for p in bucket.parameters():
            layer = self.layer_of.get(id(p), 0)
            if p.numel() and (not out or out[-1][1] != layer):
                out.append((at, layer))
            at += p.numel()
        return out

    def average(self, tensor, layers=(), loss_bound=None):
        """Averages `tensor` (any float dtype, any device) in place over the job."""
        flat = tensor.view(-1) if tensor.is_contiguous() else tensor.reshape(-1)
        shared = self.channel.region(flat.numel())
        shared.copy_(flat)
        self.delivered = self.channel.allreduce(flat.numel(), layers, loss_bound)
        self.exact = self.transport.last_exact
        shared.div_(self.world_size)
        flat.copy_(shared)
        if flat.data_ptr() != tensor.data_ptr():
            tensor.copy_(flat.view_as(tensor))
        return tensor

    def submit(self, work, device=None):
        """Runs `work` on the channel's worker; a future of its result. For a CUDA
        `device`, the work waits for what the current stream has queued so far."""
        return self.channel.submit(work, device)

    def step(self, module):
        """Counts a training step; every `resync_every` steps re-synchronises the
        parameters (see `resync`) and returns the drift it corrected, else None."""
        self.steps += 1
        if self.resync_every and self.steps % self.resync_every == 0:
            return self.resync(module)
        return None

    def resync(self, module):
        """Makes every replica's parameters the exact average of all (loss bound 0,
        so every rank gets the same bits) and returns the largest difference this
        replica had from it."""
        return self.submit(lambda: self._resync(module)).wait()

    @torch.no_grad()
    def _resync(self, module):
        params = list(module.parameters())
        total = sum(p.numel() for p in params)
        shared = self.channel.region(total)
        at = 0
        for p in params:
            shared[at:at + p.numel()].copy_(p.reshape(-1))
            at += p.numel()
        self.channel.allreduce(total, [], loss_bound=0.0)
        shared.div_(self.world_size)
        drift, at = 0.0, 0
        for p in params:
            exact = shared[at:at + p.numel()].view_as(p)
            drift = max(drift, (p.float() - exact).abs().max().item() if p.numel() else 0.0)
            p.copy_(exact)
            at += p.numel()
        self.last_drift = drift
        self.max_drift = max(self.max_drift, drift)
        return drift

    def close(self):
        if self._owns_channel:
            self.channel.close()


def allreduce_hook(state, bucket):
    """DDP communication hook: the bucket averaged over every rank by the transport,
    each part tagged with its layer's class."""
    buffer = bucket.buffer()
    layers = state.bucket_layers(bucket)
    return state.submit(lambda: state.average(buffer, layers), buffer.device)
