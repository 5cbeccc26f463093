"""What the hook adds to an allreduce: a 25 MB bucket averaged through the hook's path
(shared memory: copy in, allreduce in place, divide, copy out) beside the same
allreduce as `endhost allreduce` does it (the values through the socket), on the same
launched transport, alternating. Run one per host with MLT_SOCKET set; rank 0 prints.

    python3 hook_overhead.py [--mb 25] [--iterations 10]
"""

import argparse
import json
import socket
import statistics
import struct
import time

import torch

import mlt_transport as mlt


def socket_allreduce(path, values):
    """One allreduce with the values through the socket, as `endhost allreduce`."""
    payload = values.numpy().tobytes()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(path)
        started = time.perf_counter()
        s.sendall(json.dumps({"op": "allreduce", "values": values.numel(), "layer": 0}).encode() + b"\n")
        s.sendall(payload)
        reply = b""
        while not reply.endswith(b"\n"):
            reply += s.recv(1)
        answer = json.loads(reply)
        if answer.get("error"):
            raise mlt.TransportError(answer["error"])
        out = bytearray(len(payload))
        view, got = memoryview(out), 0
        while got < len(out):
            got += s.recv_into(view[got:])
        values.copy_(torch.frombuffer(out, dtype=torch.float32))
        return time.perf_counter() - started, answer["seconds"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=25.0)
    parser.add_argument("--iterations", type=int, default=10)
    args = parser.parse_args()
    state = mlt.HookState(torch.nn.Linear(1, 1))
    rank = state.transport.status["rank"]
    bucket = torch.ones(int(args.mb * 1e6) // 4)
    state.average(bucket)  # attaches the region
    hook, hook_transport, plain, plain_transport = [], [], [], []
    for _ in range(args.iterations):
        started = time.perf_counter()
        state.average(bucket)
        hook.append(time.perf_counter() - started)
        hook_transport.append(state.transport.last_seconds)
        wall, inside = socket_allreduce(state.transport.path, bucket)
        plain.append(wall)
        plain_transport.append(inside)
    if rank == 0:
        median = statistics.median
        print(json.dumps({
            "bucket_mb": args.mb,
            "hook_s": median(hook), "hook_transport_s": median(hook_transport),
            "hook_overhead_s": median(h - t for h, t in zip(hook, hook_transport)),
            "plain_s": median(plain), "plain_transport_s": median(plain_transport),
            "plain_overhead_s": median(p - t for p, t in zip(plain, plain_transport)),
        }))
    state.close()


if __name__ == "__main__":
    main()
