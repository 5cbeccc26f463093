"""Trains a small MLP on scikit-learn's bundled digits with DDP, the gradients
allreduced by the launched transport (--backend mlt: the mlt_transport hook, the loss
bound applied; --backend mlt-group: `init_process_group("mlt")` and DDP without a hook,
every collective exact) or by gloo (--backend gloo). Run one process per rank, as
torchrun does:

    source <(mltctl env -i inventory.yaml --host h1)   # on every host
    torchrun examples/train_digits.py --epochs 20

Rank 0 prints one JSON line per epoch: test accuracy, the epoch's training time, the
smallest fraction of a bucket the transport delivered, and the drift the last re-sync
corrected. `endhost bench train` runs it on a namespace fabric.
"""

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from sklearn.datasets import load_digits
from torch.nn.parallel import DistributedDataParallel as DDP


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["mlt", "mlt-group", "gloo"], default="mlt",
                        help="who allreduces the gradients (default: mlt, the launched "
                             "transport through the hook)")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch", type=int, default=32, help="samples per rank per step")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--resync-every", type=int, default=None,
                        help="steps between exact re-syncs (default $MLT_RESYNC_EVERY, else 100)")
    return parser.parse_args()


def data(seed):
    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    test = order[:360]
    train = order[360:]
    return (x[train], y[train]), (x[test], y[test])


def main():
    args = arguments()
    if args.backend == "mlt-group":
        import mlt_transport  # noqa: F401 (registers the mlt backend)
        dist.init_process_group("mlt")
    else:
        dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    (x, y), (x_test, y_test) = data(args.seed)
    net = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                        nn.Linear(256, 10))
    ddp = DDP(net)
    state = None
    if args.backend == "mlt":
        import mlt_transport
        state = mlt_transport.HookState(net, resync_every=args.resync_every)
        ddp.register_comm_hook(state, mlt_transport.allreduce_hook)
    optimizer = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    steps = len(y) // (args.batch * world)
    for epoch in range(1, args.epochs + 1):
        order = torch.randperm(len(y), generator=torch.Generator().manual_seed(args.seed + epoch))
        mine = order[rank::world]
        delivered, drift = 1.0, None
        dist.barrier()
        started = time.perf_counter()
        for step in range(steps):
            batch = mine[step * args.batch:(step + 1) * args.batch]
            optimizer.zero_grad()
            loss = loss_fn(ddp(x[batch]), y[batch])
            loss.backward()
            optimizer.step()
            if state is not None:
                delivered = min(delivered, state.delivered)
                corrected = state.step(net)
                drift = corrected if corrected is not None else drift
        seconds = time.perf_counter() - started
        with torch.no_grad():
            accuracy = (net(x_test).argmax(1) == y_test).float().mean().item()
        if rank == 0:
            print(json.dumps({"epoch": epoch, "accuracy": accuracy, "loss": loss.item(),
                              "seconds": seconds, "steps": steps, "delivered_min": delivered,
                              "drift": drift}), flush=True)
    if state is not None:
        state.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
