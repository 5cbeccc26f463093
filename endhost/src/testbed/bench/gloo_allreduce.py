"""One rank of the gloo baseline (`endhost bench allreduce`, `cargo bench --bench lab`):
PyTorch's allreduce over TCP on the host's NIC. Arguments: RANK WORLD BYTES ITERATIONS
MASTER_ADDR IFNAME. Rank 0 prints one JSON line per iteration with its seconds (timed
after a barrier)."""
import json
import os
import sys
import time

import torch
import torch.distributed as dist

rank, world, size, iterations = (int(a) for a in sys.argv[1:5])
master, ifname = sys.argv[5], sys.argv[6]
os.environ["GLOO_SOCKET_IFNAME"] = ifname
dist.init_process_group("gloo", init_method="tcp://%s:29500" % master, rank=rank, world_size=world)
tensor = torch.ones(size // 4)
dist.all_reduce(tensor)
for i in range(iterations):
    dist.barrier()
    start = time.perf_counter()
    dist.all_reduce(tensor)
    elapsed = time.perf_counter() - start
    if rank == 0:
        print(json.dumps({"iteration": i, "seconds": elapsed}), flush=True)
