#!/usr/bin/env bash
# Peak memory per rank of each strategy: GPT-2 124M on the CPU, 2 ranks, as summary.json reports
# it: the resident peak of each rank (what top shows at its highest) and the peak of live host
# tensors, next to the plan's estimate of the state per rank.
#   bench/memory.sh [STRATEGY...]     default: ddp zero1 zero2 zero3; STEPS=6 by default
set -euo pipefail
genesis=${GENESIS:-$(dirname "$0")/../build/bin/genesis}
steps=${STEPS:-6}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

printf '%-6s %-22s %-22s %s\n' strategy "peak RSS (MB)" "peak tensors (MB)" "plan (MiB)"
for s in ${@:-ddp zero1 zero2 zero3}; do
  "$genesis" launch --nproc 2 train --preset gpt2 --set training.device=cpu \
    --set model.block_size=128 --set training.per_device_train_batch_size=1 \
    --set training.max_steps="$steps" --set distributed.strategy="$s" \
    --set training.output_dir="$work" --overwrite > "$work/$s.log" 2>&1 ||
    { echo "$s failed:"; tail -5 "$work/$s.log"; exit 1; }
  python3 - "$work/gpt2/summary.json" "$s" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rss = "/".join(str(round(x)) for x in d["peak_rss_mb_per_rank"])
tensors = "/".join(str(round(x)) for x in d["peak_host_tensor_mb_per_rank"])
print(f"{sys.argv[2]:<6} {rss:<22} {tensors:<22} {round(d['memory_estimate_mb'])}")
PY
done
