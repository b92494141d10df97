#!/usr/bin/env bash
# GPU training throughput of the GPT-2 124M shape in bf16: genesis (the gpt2 preset; tokens/s
# and MFU from summary.json, training time only) against PyTorch eager and torch.compile on the
# same shape, batch and optimizer (bench/torch_gpt_cuda.py), side by side in one run. Both leave
# the first 3 steps (warm-up) untimed and synchronise the GPU before reading the clock.
#
#   bench/gpt_cuda.sh [BUILD_DIR]      # env: STEPS (30), BATCH (16), BLOCK_SIZE (1024), COMPILE (1),
#                                      # TORCH (1; 0: genesis alone)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
steps=${STEPS:-30}
batch=${BATCH:-16}
block=${BLOCK_SIZE:-1024}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

"$build/bin/genesis" --log-level warn train --preset gpt2 --set training.device=cuda \
  --set name=bench-gpt-cuda --set training.output_dir="\"$out\"" \
  --set model.block_size=$block --set training.per_device_train_batch_size=$batch \
  --set training.max_steps=$steps --set training.logging_steps=$steps \
  --set data.num_samples=$((batch * (steps + 2) + 16)) > /dev/null
read -r genesis_tps mfu mem < <(python3 -c "
import json, sys
s = json.load(open(sys.argv[1]))
mfu = s.get('mfu')
print(round(s['tokens_per_s']), 'n/a' if mfu is None else '%.1f%%' % (100 * mfu),
      round(s['peak_device_memory_mb_per_rank'][0]))" "$out/bench-gpt-cuda/summary.json")
echo "shape: GPT-2 124M (12 layers, 768 wide, 12 heads, vocab 50304), block $block, batch $batch, bf16, AdamW"
printf 'genesis           %8s tokens/s  MFU %s  peak %s MiB\n' "$genesis_tps" "$mfu" "$mem"

[ "${TORCH:-1}" = 0 ] && exit 0
if ! python3 -c "import torch; assert torch.cuda.is_available()" 2> /dev/null; then
  echo "pytorch           skipped: no torch with CUDA here"
  exit 0
fi
for mode in eager compile; do
  [ "$mode" = compile ] && [ "${COMPILE:-1}" = 0 ] && continue
  flag=""; [ "$mode" = compile ] && flag="--compile"
  json=$(python3 "$here/torch_gpt_cuda.py" --batch "$batch" --block-size "$block" --steps "$steps" $flag)
  tps=$(echo "$json" | python3 -c "import json,sys; print(round(json.load(sys.stdin)['tokens_per_s']))")
  printf 'pytorch %-9s %8s tokens/s  genesis / pytorch %s\n' "$mode" "$tps" \
    "$(python3 -c "print('%.2fx' % ($genesis_tps / $tps))")"
done
