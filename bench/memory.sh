#!/usr/bin/env bash
# Peak resident memory per rank of each strategy: GPT-2 124M on the CPU, 2 ranks, sampled every
# half second from /proc (what a user sees in top), next to the plan's estimate from the banner.
#   bench/memory.sh [STRATEGY...]     default: ddp zero1 zero2 zero3; STEPS=6 by default
set -euo pipefail
genesis=${GENESIS:-$(dirname "$0")/../build/bin/genesis}
steps=${STEPS:-6}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

peak_of_children() {  # launcher pid -> highest VmRSS (MB) any of its ranks reached
  local launcher=$1 peak=0 rss
  while kill -0 "$launcher" 2>/dev/null; do
    for p in $(pgrep -P "$launcher" || true); do
      rss=$(awk '/VmRSS/ {print int($2 / 1024)}' "/proc/$p/status" 2>/dev/null || echo 0)
      [ "${rss:-0}" -gt "$peak" ] && peak=$rss
    done
    sleep 0.5
  done
  echo "$peak"
}

for strategy in "${@:-ddp zero1 zero2 zero3}"; do
  for s in $strategy; do
    "$genesis" launch --nproc 2 train --preset gpt2 --set training.device=cpu \
      --set model.block_size=128 --set training.per_device_train_batch_size=1 \
      --set training.max_steps="$steps" --set distributed.strategy="$s" \
      --set training.output_dir="$work" --overwrite > "$work/$s.log" 2>&1 &
    peak=$(peak_of_children $!)
    plan=$(grep -m1 -o 'per rank: .*' "$work/$s.log" || echo "no plan line")
    printf '%-6s peak %5d MB   plan %s\n' "$s" "$peak" "$plan"
  done
done
