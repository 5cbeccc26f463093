"""Scenarios the Rust test endhost/tests/python.rs runs against launched transports on
loopback: one process per training rank, each printing one JSON line of what it saw.

    python3 scenarios.py SCENARIO      (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
                                        MASTER_PORT and MLT_SOCKET in the environment)
"""

import json
import os
import sys
import threading
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import mlt_transport as mlt


def emit(seen):
    """One JSON line in one write: two ranks under torchrun share the launcher's stdout,
    and print() may write the line and its newline apart, so lines could interleave."""
    os.write(1, (json.dumps(seen) + "\n").encode())


def model(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8))


def rank_input():
    g = torch.Generator().manual_seed(1000 + dist.get_rank())
    return torch.randn(16, 32, generator=g), torch.randn(16, 8, generator=g)


def against_gloo():
    """Every bucket the hook reduces (f32, through DDP) is compared with gloo's
    allreduce of the same bucket (sum, then divided by the world size)."""
    dist.init_process_group("gloo")
    net = model()
    ddp = DDP(net, bucket_cap_mb=0.01)  # several buckets
    state = mlt.HookState(net)
    seen = []

    def hook(s, bucket):
        reference = bucket.buffer().clone()
        dist.all_reduce(reference)
        reference /= dist.get_world_size()
        layers = s.bucket_layers(bucket)

        def check(f):
            out = f.value()
            seen.append({"bits_equal": bool(torch.equal(out, reference)),
                         "max_diff": (out - reference).abs().max().item(),
                         "layers": layers})
            return out
        return mlt.allreduce_hook(s, bucket).then(check)

    ddp.register_comm_hook(state, hook)
    x, y = rank_input()
    for _ in range(2):
        ((ddp(x) - y) ** 2).mean().backward()
    emit({
        "rank": dist.get_rank(),
        "world_size": dist.get_world_size(),
        "buckets": len(seen),
        "bits_equal": all(b["bits_equal"] for b in seen),
        "max_diff": max(b["max_diff"] for b in seen),
        "layers": [b["layers"] for b in seen],
        "ranks_equal": gathered_equal(torch.cat([p.grad.reshape(-1) for p in net.parameters()])),
    })
    state.close()


def gathered_equal(tensor):
    """Whether every rank holds the same bits."""
    everyone = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(everyone, tensor)
    return all(torch.equal(everyone[0], t) for t in everyone)


def half_precision():
    """f16 and bf16 tensors are converted for the transport and back: the result is
    gloo's f32 average of the same values, rounded to the tensor's type."""
    dist.init_process_group("gloo")
    state = mlt.HookState(model())
    out = {}
    for dtype in (torch.float16, torch.bfloat16):
        g = torch.Generator().manual_seed(7 + dist.get_rank())
        tensor = torch.randn(10_000, generator=g).to(dtype)
        reference = tensor.float()
        dist.all_reduce(reference)
        reference = (reference / dist.get_world_size()).to(dtype)
        result = state.average(tensor.clone())
        out[str(dtype)] = {"dtype_kept": result.dtype == dtype,
                           "bits_equal": bool(torch.equal(result, reference))}
    emit(out)
    state.close()


def resync():
    """Replicas made to differ are equal, bit for bit, after one re-sync, and the
    drift it reports is the difference it corrected."""
    dist.init_process_group("gloo")
    net = model()
    ddp = DDP(net)
    state = mlt.HookState(net, resync_every=3)
    ddp.register_comm_hook(state, mlt.allreduce_hook)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    x, y = rank_input()
    drifts = []
    for step in range(6):
        optimizer.zero_grad()
        ((ddp(x) - y) ** 2).mean().backward()
        optimizer.step()
        if step == 1:
            with torch.no_grad():
                for p in net.parameters():
                    p.add_(0.01 * (dist.get_rank() + 1))
        drifts.append(state.step(net))
    flat = torch.cat([p.detach().reshape(-1) for p in net.parameters()])
    emit({
        "drifts": drifts,
        "max_drift": state.max_drift,
        "loss_bound": state.transport.status["loss_bound"],
        "exact": state.exact,
        "replicas_equal": gathered_equal(flat),
    })
    state.close()


def errors():
    """The package's error paths, from rank 0 of a running 2-host job whose rank 1
    never asks for anything."""
    out = {}
    saved = os.environ.pop("MLT_SOCKET")
    try:
        mlt.Transport()
    except mlt.TransportError as e:
        out["unset"] = str(e)
    os.environ["MLT_SOCKET"] = saved
    try:
        mlt.Transport(socket_path=saved + ".absent")
    except mlt.TransportNotRunning as e:
        out["absent"] = str(e)
    try:
        mlt.Transport(local_rank=3).attach(4096)
    except mlt.TransportError as e:
        out["local_rank"] = str(e)
    dist.init_process_group("gloo", world_size=1, rank=0, init_method="tcp://127.0.0.1:%s" % os.environ["MASTER_PORT"])
    try:
        mlt.HookState(model())
    except mlt.TransportError as e:
        out["world"] = str(e)
    first = mlt.Transport(local_rank=0)
    first.attach(4096)
    try:
        mlt.Transport(local_rank=0).attach(4096)
    except mlt.TransportError as e:
        out["duplicate"] = str(e)
    first.close()
    time.sleep(0.5)  # the transport sees the connection end and frees local rank 0
    transport = mlt.Transport(timeout=2)
    transport.attach(4096)
    started = time.monotonic()
    try:
        transport.allreduce_shared(1024)
    except mlt.TransportError as e:
        out["timeout"] = str(e)
    out["waited"] = time.monotonic() - started
    emit(out)


def departure():
    """A 2-host job of 2 processes per host, played by threads of this process: local
    rank r of host h contributes 1 + r + 2h (a round's sum is 10). Host 0's rank 1
    leaves; host 0's rank 0 must hear it at once, and a new rank 1 must rejoin."""
    sockets = os.environ["MLT_TEST_SOCKETS"].split(",")

    def connect(host, rank):
        t = mlt.Transport(socket_path=sockets[host], local_rank=rank, timeout=30)
        t.attach(4096)
        return t

    def allreduce(ranks):
        """Every (host, rank, transport) allreduces at once; each one's first value
        after it, or its error."""
        results = [None] * len(ranks)

        def one(i, host, rank, t):
            view = torch.frombuffer(t.region, dtype=torch.float32)
            view[:16] = 1 + rank + 2 * host
            try:
                t.allreduce_shared(16)
                results[i] = view[0].item()
            except mlt.TransportError as e:
                results[i] = str(e)
        threads = [threading.Thread(target=one, args=(i, *r)) for i, r in enumerate(ranks)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        return results

    everyone = [(h, r, connect(h, r)) for h in (0, 1) for r in (0, 1)]
    out = {"first": allreduce(everyone)}
    everyone[1][2].close()
    time.sleep(0.5)  # the transport sees the connection end
    started = time.monotonic()
    left = allreduce([everyone[0]])
    out["left_waited"] = time.monotonic() - started
    out["left_error"] = left[0]
    out["others"] = allreduce(everyone[2:])
    everyone[1] = (0, 1, connect(0, 1))
    out["rejoined"] = allreduce(everyone)
    emit(out)


def backend():
    """init_process_group("mlt"): every collective the backend offers against gloo's
    (a gloo group beside it) or against what every rank gave, bit for bit; DDP without
    a hook trains as on gloo; the hook shares the group's connection; what the backend
    does not offer says so."""
    dist.init_process_group("mlt")
    gloo = dist.new_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    g = torch.Generator().manual_seed(100 + rank)
    out = {"rank": rank, "world_size": world, "backend": dist.get_backend()}

    def summed(dtype, op):
        t = (torch.randn(5000, generator=g) * 100).to(dtype)
        # gloo sums no bfloat16: its float32 sum, rounded, is what the backend gives.
        reference = t.float() if dtype == torch.bfloat16 else t.clone()
        dist.all_reduce(reference, op=dist.ReduceOp.SUM, group=gloo)
        reference = reference.to(dtype)
        if op == dist.ReduceOp.AVG:
            reference = (reference.double() / world).to(dtype) if dtype != torch.int64 else reference // world
        dist.all_reduce(t, op=op)
        # Bits as gloo's with two ranks; with more the transport adds in another order.
        return {"bits_equal": bool(torch.equal(t, reference)),
                "max_rel": ((t.double() - reference.double()).abs().max()
                            / reference.double().abs().max()).item()}

    out["all_reduce"] = {
        "f32_sum": summed(torch.float32, dist.ReduceOp.SUM),
        "f16_sum": summed(torch.float16, dist.ReduceOp.SUM),
        "bf16_sum": summed(torch.bfloat16, dist.ReduceOp.SUM),
        "i64_sum": summed(torch.int64, dist.ReduceOp.SUM),
        "f32_avg": summed(torch.float32, dist.ReduceOp.AVG),
    }
    # Broadcast and all-gather move bytes: any dtype, any bit pattern (what each rank
    # gives is known to all).
    def given(r):
        return {
            "i64": torch.arange(7, dtype=torch.int64) * (1 << 40) + r,
            "f32": torch.tensor([float("nan"), -0.0, float("inf"), 1e-40, r + 0.5]),
            "bool": torch.tensor([True, r == 0, False]),
            "u8": torch.arange(5, dtype=torch.uint8) + r,
        }

    def bits(x):
        return x.view(torch.uint8)

    moved = {}
    for name, t in given(rank).items():
        b = t.clone()
        dist.broadcast(b, src=world - 1)
        gathered = [torch.empty_like(t) for _ in range(world)]
        dist.all_gather(gathered, t)
        moved[name] = {
            "broadcast": bool(torch.equal(bits(b), bits(given(world - 1)[name]))),
            "all_gather": all(torch.equal(bits(x), bits(given(r)[name]))
                              for r, x in enumerate(gathered)),
        }
    out["moved"] = moved
    flat = torch.empty(world * 3)
    dist.all_gather_into_tensor(flat, torch.full((3,), float(rank)))
    out["all_gather_base"] = flat.tolist()
    parts = [torch.full((4,), float(rank * 10 + r)) for r in range(world)]
    got = torch.empty(4)
    dist.reduce_scatter(got, parts)
    out["reduce_scatter"] = got.tolist()
    got = torch.empty(4)
    dist.reduce_scatter_tensor(got, torch.cat(parts))
    out["reduce_scatter_tensor"] = got.tolist()
    reduced = torch.full((2,), float(rank + 1))
    dist.reduce(reduced, dst=0)
    out["reduce_at_root"] = reduced.tolist() if rank == 0 else None
    dist.barrier()
    try:
        dist.all_reduce(torch.ones(3, dtype=torch.float64))
        out["f64"] = "summed"
    except (TypeError, RuntimeError) as e:
        out["f64"] = str(e)
    try:
        dist.all_to_all([torch.empty(1)] * world, [torch.empty(1)] * world)
        out["all_to_all"] = "ran"
    except (NotImplementedError, RuntimeError) as e:
        out["all_to_all"] = str(e)

    # DDP without a hook, beside the same model on gloo: the same gradients, bit for bit.
    nets = [model(), model()]
    ddps = [DDP(nets[0]), DDP(nets[1], process_group=gloo)]
    x, y = rank_input()
    for ddp in ddps:
        for _ in range(2):
            ((ddp(x) - y) ** 2).mean().backward()
    grads = [torch.cat([p.grad.reshape(-1) for p in n.parameters()]) for n in nets]
    out["ddp_equals_gloo"] = bool(torch.equal(grads[0], grads[1]))
    out["ddp_max_diff"] = (grads[0] - grads[1]).abs().max().item()
    # The hook on the mlt group: the group's own connection.
    net = model()
    ddp = DDP(net)
    state = mlt.HookState(net)
    ddp.register_comm_hook(state, mlt.allreduce_hook)
    ((ddp(x) - y) ** 2).mean().backward()
    out["hook_shares_the_group"] = state.channel is mlt.backend.default_channel()
    out["hook_delivered"] = state.delivered
    emit(out)


if __name__ == "__main__":
    import faulthandler
    faulthandler.dump_traceback_later(60, exit=True)
    {"gloo": against_gloo, "half": half_precision, "resync": resync,
     "errors": errors, "departure": departure, "backend": backend}[sys.argv[1]]()
    # torch 1.13 can abort at exit ("terminate called without an active exception")
    # when gloo's process group is left to the interpreter's teardown.
    if dist.is_initialized():
        dist.destroy_process_group()
