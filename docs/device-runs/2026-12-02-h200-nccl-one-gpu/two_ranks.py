"""Two NCCL ranks on one GPU: what a record that asserts `world_size == 8` would meet on a node with fewer GPUs
if repro let it start 8 processes anyway (pipeline/records/world_size.py says NCCL runs one process per GPU).

    torchrun --standalone --nproc_per_node=2 docs/device-runs/2026-12-02-h200-nccl-one-gpu/two_ranks.py

Each rank binds cuda:0 (the only GPU), joins an NCCL group and all-reduces one tensor; prints what happened.
"""
import os
import sys

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
torch.cuda.set_device(0)
try:
    dist.init_process_group("nccl", device_id=torch.device("cuda", 0))
    x = torch.ones(4, device="cuda") * (rank + 1)
    dist.all_reduce(x)
    torch.cuda.synchronize()
    print(f"rank {rank}: all_reduce done: {x.tolist()}", flush=True)
    dist.destroy_process_group()
except Exception as exc:  # noqa: BLE001 -- the error is the answer
    print(f"rank {rank}: {type(exc).__name__}: {str(exc).splitlines()[0][:400]}", flush=True)
    sys.exit(1)
