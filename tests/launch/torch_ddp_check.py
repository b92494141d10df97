#!/usr/bin/env python3
"""A PyTorch DDP program as users write it, run by tests/launch/test_multi_host.cpp under
`genesis launch` across two simulated hosts: init_process_group("gloo") from the environment
genesis sets, an all_reduce with an exact answer, one DDP step on different data per rank, and a
check that every replica holds the same parameters afterwards. Prints one JSON line per rank
(with the torchrun variables it saw); exit 1 on a wrong result."""
import json
import os
import socket

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()

total = torch.tensor([float(rank + 1)])
dist.all_reduce(total)

torch.manual_seed(0)  # the same initial weights everywhere; DDP broadcasts rank 0's anyway
model = DistributedDataParallel(torch.nn.Linear(4, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
torch.manual_seed(1 + rank)  # each rank its own batch
model(torch.randn(8, 4)).pow(2).mean().backward()
optimizer.step()
flat = torch.cat([p.detach().flatten() for p in model.parameters()])
replicas = [torch.zeros_like(flat) for _ in range(world)]
dist.all_gather(replicas, flat)

names = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "LOCAL_WORLD_SIZE",
         "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID"]
report = {"rank": rank, "world": world, "host": socket.gethostname(),
          "all_reduce": total.item(), "expected": world * (world + 1) / 2,
          "replicas_equal": all(torch.equal(r, replicas[0]) for r in replicas),
          "env": {n: os.environ.get(n) for n in names}}
print(json.dumps(report), flush=True)
dist.destroy_process_group()
raise SystemExit(0 if report["all_reduce"] == report["expected"] and report["replicas_equal"] else 1)
