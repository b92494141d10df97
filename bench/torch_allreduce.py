#!/usr/bin/env python3
"""torch.distributed (gloo) reference for `genesis bench-allreduce`: all_reduce latency at 1 KiB
and bus bandwidth at 64 MiB on the same machine. Start it with genesis's launcher (Debian's
torchrun fails on Python 3.11), which also checks that PyTorch reads genesis's env contract:

    genesis launch --nproc 2 -- python3 bench/torch_allreduce.py
"""
import json
import time

import torch
import torch.distributed as dist


def measure(nbytes, iters, warmup):
    t = torch.ones(nbytes // 4)
    for _ in range(warmup):
        dist.all_reduce(t)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t)
    return (time.perf_counter() - start) / iters


def main():
    dist.init_process_group("gloo")
    n = dist.get_world_size()
    small = measure(1024, 200, 20)
    big = measure(64 << 20, 10, 2)
    if dist.get_rank() == 0:
        busbw = (64 << 20) / big / 1e9 * 2 * (n - 1) / n
        print(json.dumps({"torch_version": torch.__version__, "ranks": n,
                          "latency_1k_us": small * 1e6, "busbw_64m_gbps": busbw}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
