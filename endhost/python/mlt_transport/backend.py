"""The `mlt` backend of torch.distributed: `import mlt_transport` registers it, and

    dist.init_process_group("mlt")        # under torchrun, with the env `mltctl env` gives

runs the job's collectives on the launched transport: all_reduce (sum, avg; float32,
float16, bfloat16, their complex forms, and integers that float32 holds exactly; not
float64, which the transport's float32 sum would round), broadcast,
all_gather, reduce_scatter, reduce and barrier. Every collective here is exact (loss
bound 0): DDP without a hook gets gloo's results. The loss bound is applied only where a
caller asks for it, for gradients: `mlt_transport.allreduce_hook` on DDP, which shares
this group's connection.

The transport sums; what is not a sum is one: a broadcast is the root's values plus
everyone else's zeros, an all-gather each rank's values in its own slot of zeros. Those
carry the tensors' bytes, three to a float32 (an integer below 2^24, which a sum with
zeros leaves exact), so any dtype crosses bit for bit. gather, scatter, all_to_all and
point-to-point sends are not offered (a gloo group beside this one can do them).
"""

import threading

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future

from .channel import Channel
from .client import TransportError

NAME = "mlt"
# Bytes a float32 lane carries: integers below 2^24 sum exactly with zeros.
LANE_BYTES = 3
# Integers are summed as float32: exact while |value| × ranks stays below this.
EXACT_INTEGERS = 1 << 24
# What the transport's float32 sum holds without losing precision.
FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.complex64, torch.complex32)

# Groups created in this process, so the hook can share the default group's channel.
_groups = []


def default_channel():
    """The channel of the default process group if it is an `mlt` one, else None."""
    if not dist.is_initialized():
        return None
    default = dist.distributed_c10d._get_default_group()
    for group in _groups:
        if group is default:
            return group.channel
    return None


def _work(future):
    """A work that is done when `future` is (torch's own wrapper, which torch's C++
    waits on as on any other)."""
    return _create_work_from_future(future)


def _bytes_of(tensor):
    """A tensor's bytes, flat (a contiguous copy if it is not contiguous)."""
    return tensor.detach().contiguous().view(-1).view(torch.uint8)


def _lanes(count):
    return -(-count // LANE_BYTES)


def _write_bytes(region, data):
    """`data` (uint8) into `region` (float32 lanes), three bytes a lane."""
    pad = (-data.numel()) % LANE_BYTES
    if pad:
        data = torch.cat([data, torch.zeros(pad, dtype=torch.uint8)])
    b = data.view(-1, LANE_BYTES).to(torch.int32)
    region.copy_(b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16))


def _read_bytes(region, count):
    """`count` bytes back out of `region`'s lanes."""
    v = region.to(torch.int32)
    b = torch.stack([v & 0xFF, (v >> 8) & 0xFF, (v >> 16) & 0xFF], dim=1)
    return b.to(torch.uint8).view(-1)[:count]


def _set_bytes(tensor, data):
    """Writes `data` (uint8) into `tensor`, bit for bit."""
    if tensor.is_contiguous():
        tensor.view(-1).view(torch.uint8).copy_(data)
    else:
        tensor.copy_(data.view(tensor.dtype).view(tensor.shape))


def _reduce_op(opts):
    op = opts.reduceOp
    if op == dist.ReduceOp.SUM:
        return "sum"
    if op == dist.ReduceOp.AVG:
        return "avg"
    raise NotImplementedError(f"the mlt backend sums (SUM, AVG), not {op}")


def _refused(what):
    """A collective the backend does not offer: it says so and names the way round."""

    def refuse(self, *args):
        raise NotImplementedError(
            f"the mlt backend does not offer {what}: create a gloo group beside it "
            "(dist.new_group(backend=\"gloo\"))"
        )

    return refuse


class ProcessGroupMLT(dist.ProcessGroup):
    """The job's collectives on the launched transport. One per process, covering
    every rank of the job (hosts × processes per host)."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self.channel = Channel()
        status = self.channel.status
        served = status["world_size"] * status["local_ranks"]
        if size != served:
            self.channel.close()
            raise TransportError(
                f"an mlt group must hold the whole job: it has {size} ranks, the transport "
                f"serves {status['world_size']} hosts × {status['local_ranks']} processes "
                "(a gloo group can hold a subset)"
            )

    def getBackendName(self):
        return NAME

    def _run(self, work):
        """Runs `work` on the channel's worker, after what was asked before."""
        return _work(self.channel.submit(work))

    def _run_now(self, work):
        """Runs `work` as `_run` does and returns once it is done: torch's C++ waits
        on some collectives (DDP's checks of the parameters, its first broadcast)
        holding the interpreter's lock, which the worker needs."""
        done = self.channel.submit(work)
        finished = threading.Event()
        done.add_done_callback(lambda _: finished.set())
        finished.wait()
        return _work(done)

    # -- sums ------------------------------------------------------------------------

    def _sum(self, flats, op):
        """Sums the 1-D tensors `flats` over the job, in place (one allreduce)."""
        for f in flats:
            if f.dtype in FLOATS:
                continue
            if f.is_floating_point() or f.is_complex() or f.dtype == torch.bool:
                raise TypeError(
                    f"the mlt backend sums in float32, which would round {f.dtype}: "
                    "sum it in a gloo group beside it (dist.new_group(backend=\"gloo\"))"
                )
            if f.numel() and f.abs().max().item() * self.size() >= EXACT_INTEGERS:
                raise ValueError(
                    f"the mlt backend sums integers as float32: |values| × {self.size()} "
                    f"ranks must stay below 2^24"
                )
        flats = [torch.view_as_real(f).view(-1) if f.dtype.is_complex else f for f in flats]
        n = sum(f.numel() for f in flats)

        def work():
            region = self.channel.region(n)
            at = 0
            for f in flats:
                region[at:at + f.numel()].copy_(f)
                at += f.numel()
            self.channel.allreduce(n, [], loss_bound=0.0)
            if op == "avg":
                region.div_(self.size())
            at = 0
            for f in flats:
                part = region[at:at + f.numel()]
                f.copy_(part.round() if not f.dtype.is_floating_point else part)
                at += f.numel()

        return work

    def allreduce(self, tensors, opts):
        op = _reduce_op(opts)
        flats = [t.view(-1) if t.is_contiguous() else t.reshape(-1) for t in tensors]
        sum_ = self._sum(flats, op)

        def work():
            sum_()
            for t, f in zip(tensors, flats):
                if f.data_ptr() != t.data_ptr():
                    t.copy_(f.view_as(t))
            return tensors

        return self._run(work)

    def allreduce_coalesced(self, tensors, opts):
        return self.allreduce(tensors, opts)

    def reduce(self, tensors, opts):
        # Every rank gets the sum; only the root's is defined by torch.distributed.
        return self.allreduce(tensors, opts)

    def _reduce_scatter(self, output, inputs, op):
        """output ← the sum over ranks of `inputs[rank]` (each rank's list of `size`)."""
        joined = torch.cat([t.reshape(-1) for t in inputs])
        sum_ = self._sum([joined], op)
        per = output.numel()

        def work():
            sum_()
            mine = joined[self.rank() * per:(self.rank() + 1) * per]
            output.copy_(mine.view_as(output))
            return [output]

        return self._run_now(work)

    def reduce_scatter(self, output_tensors, input_tensors, opts):
        return self._reduce_scatter(output_tensors[0], input_tensors[0], _reduce_op(opts))

    def _reduce_scatter_base(self, output, input, opts):
        return self._reduce_scatter(output, list(input.reshape(self.size(), -1)), _reduce_op(opts))

    def barrier(self, opts=None):
        def work():
            self.channel.region(1).zero_()
            self.channel.allreduce(1, [], loss_bound=0.0)
            return []

        return self._run_now(work)

    # -- moves, bit for bit ------------------------------------------------------

    def _gather(self, outputs, input):
        """Every rank's `input` into `outputs` (one tensor per rank), bit for bit."""
        data = _bytes_of(input)
        count = data.numel()
        lanes = _lanes(count)

        def work():
            region = self.channel.region(lanes * self.size())
            region.zero_()
            mine = region[self.rank() * lanes:(self.rank() + 1) * lanes]
            _write_bytes(mine, data)
            self.channel.allreduce(lanes * self.size(), [], loss_bound=0.0)
            for r, out in enumerate(outputs):
                _set_bytes(out, _read_bytes(region[r * lanes:(r + 1) * lanes], count))
            return outputs

        return self._run_now(work)

    def allgather(self, output_tensors, input_tensors, opts=None):
        return self._gather(output_tensors[0], input_tensors[0])

    def _allgather_base(self, output, input, opts=None):
        return self._gather(list(output.reshape(self.size(), -1)), input)

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        raise NotImplementedError("the mlt backend gathers one tensor at a time")

    def broadcast(self, tensors, opts):
        root = opts.rootRank
        datas = [_bytes_of(t) for t in tensors]
        counts = [d.numel() for d in datas]
        lanes = [_lanes(c) for c in counts]

        def work():
            region = self.channel.region(sum(lanes))
            region.zero_()
            if self.rank() == root:
                at = 0
                for d, n in zip(datas, lanes):
                    _write_bytes(region[at:at + n], d)
                    at += n
            self.channel.allreduce(sum(lanes), [], loss_bound=0.0)
            at = 0
            for t, c, n in zip(tensors, counts, lanes):
                _set_bytes(t, _read_bytes(region[at:at + n], c))
                at += n
            return tensors

        return self._run_now(work)

    gather = _refused("gather")
    scatter = _refused("scatter")
    alltoall = _refused("all_to_all")
    alltoall_base = _refused("all_to_all")
    send = _refused("send")
    recv = _refused("recv")
    recv_anysource = _refused("recv")


def _create(store, rank, size, timeout):
    group = ProcessGroupMLT(store, rank, size, timeout)
    _groups.append(group)
    return group


def register():
    """Registers the `mlt` backend with torch.distributed (done on import)."""
    if not hasattr(dist.Backend, NAME.upper()):
        dist.Backend.register_backend(NAME, _create)
