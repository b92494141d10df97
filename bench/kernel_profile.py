#!/usr/bin/env python3
"""Summarises an Nsight Compute CSV of genesis's steady-state GPU kernels (bench/gpu_check.sh's
profile stage): the kernels of each whole training step (a step ends at the optimizer's last
launch), the GPU time they add up to against the step's wall-clock time measured without the
profiler, so that the difference is the time the GPU waits for the host, and the kernels that
take the most time.

    python3 bench/kernel_profile.py NCU_CSV WALL_MS_PER_STEP [STEP_END_KERNEL]
"""
import collections
import csv
import re
import sys

UNITS = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0}


def kernels(path):
    """(short name, ms) per profiled kernel, in launch order."""
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]  # ncu's own log lines are not CSV
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        name = re.sub(r"\(.*", "", row["Kernel Name"])  # drop the argument list
        name = re.sub(r"genesis::cuda::(\(anonymous namespace\)::)?", "", name)
        yield name[:70], value * UNITS[row["Metric Unit"]]


def main():
    path, wall_ms = sys.argv[1], float(sys.argv[2])
    end = sys.argv[3] if len(sys.argv) > 3 else "adamw_multi_kernel"
    ks = list(kernels(path))
    # Whole steps only: from just after one step's last optimizer launch to the next's.
    ends = [i for i, (n, _) in enumerate(ks) if end in n and (i + 1 == len(ks) or end not in ks[i + 1][0])]
    if len(ends) < 2:
        sys.exit(f"fewer than 2 step ends ('{end}') among {len(ks)} kernels")
    steps = [ks[a + 1:b + 1] for a, b in zip(ends, ends[1:])]
    busy = [sum(ms for _, ms in s) for s in steps]
    mean_busy = sum(busy) / len(busy)
    print(f"{len(steps)} whole steps, {len(steps[0])} kernels each; GPU busy {mean_busy:.2f} ms "
          f"of {wall_ms:.2f} ms a step ({100 * mean_busy / wall_ms:.0f}%; the host keeps the GPU "
          f"waiting {wall_ms - mean_busy:.2f} ms)")
    by_name = collections.defaultdict(lambda: [0.0, 0])
    for s in steps:
        for n, ms in s:
            by_name[n][0] += ms / len(steps)
            by_name[n][1] += 1
    print(f"{'kernel':70} {'ms/step':>8} {'share':>6} {'calls':>6}")
    for n, (ms, calls) in sorted(by_name.items(), key=lambda kv: -kv[1][0])[:25]:
        print(f"{n:70} {ms:8.3f} {100 * ms / mean_busy:5.1f}% {calls // len(steps):6d}")


if __name__ == "__main__":
    main()
