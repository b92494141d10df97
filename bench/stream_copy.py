"""The memory-traffic bound for bench-allreduce on this machine: every rank copies a buffer of
the given size with numpy at the same time (run it under `genesis launch --nproc N`), and rank 0
prints the median time of one copy and the copy rate (bytes copied per second, each read once and
written once). An all-reduce that moves k times the message per rank through memory cannot beat
k/2 of these copies."""
import os
import sys
import time

import numpy as np

size = int(sys.argv[1]) if len(sys.argv) > 1 else 64 << 20
iters = 30
src = np.ones(size // 4, dtype=np.float32)
dst = np.empty_like(src)
np.copyto(dst, src)
times = []
for _ in range(iters):
    start = time.perf_counter()
    np.copyto(dst, src)
    times.append(time.perf_counter() - start)
median = sorted(times)[iters // 2]
if os.environ.get("RANK", "0") == "0":
    print(f"copy {size} bytes: median {median * 1e3:.2f} ms, {size / median / 1e9:.2f} GB/s per rank")
