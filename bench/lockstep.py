#!/usr/bin/env python3
"""Summed tokens/s of independent jobs that ran at once, and what they would have given in lockstep.

    lockstep.py PREFIX    # reads PREFIX-<i>.rate (tokens/s) and PREFIX-<i>/metrics.jsonl

Each job logged every step. Step k of the jobs ran at about the same time; in lockstep each would
have lasted as long as the slowest job's step k, as in a data-parallel job whose ranks wait for
each other every step. Prints "<summed tokens/s> <lockstep tokens/s>".
"""
import glob
import json
import sys

WARMUP = 3  # the first steps' intervals hold start-up work, as genesis's own figure leaves out


def step_times(metrics):
    elapsed = [json.loads(line)["elapsed_s"] for line in open(metrics) if '"elapsed_s"' in line]
    return [b - a for a, b in zip(elapsed, elapsed[1:])][WARMUP:]


def main(prefix):
    rates = [float(open(f).read()) for f in sorted(glob.glob(prefix + "-*.rate"))]
    jobs = [step_times(f) for f in sorted(glob.glob(prefix + "-*/metrics.jsonl"))]
    steps = min((len(t) for t in jobs), default=0)
    if not rates or len(jobs) != len(rates) or steps == 0:
        sys.exit(f"lockstep.py: no per-step metrics under {prefix}-*")
    # Seconds for the steps as the jobs ran them (on average) and as the slowest of each sets.
    apart = sum(sum(t[k] for t in jobs) / len(jobs) for k in range(steps))
    lockstep = sum(max(t[k] for t in jobs) for k in range(steps))
    summed = sum(rates)
    print(round(summed), round(summed * apart / lockstep))


if __name__ == "__main__":
    main(sys.argv[1])
