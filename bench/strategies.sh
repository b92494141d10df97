#!/usr/bin/env bash
# Training throughput of every strategy at N ranks (default 2) on the GPT shape of gpt_cpu.sh,
# relative to ddp, measured back to back in one run. Each figure is the tokens_per_s that rank 0
# writes to summary.json (training time only, summed over ranks). Strategies that this build
# cannot run are reported as such.
#
#   bench/strategies.sh [BUILD_DIR]   # env: NPROC (2), STEPS (20), STRATEGIES, N_LAYER, N_EMBD, ...
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
nproc_=${NPROC:-2}
steps=${STEPS:-20}
strategies=${STRATEGIES:-"ddp zero1 zero2 zero3"}
n_layer=${N_LAYER:-4} n_embd=${N_EMBD:-256} n_head=${N_HEAD:-4}
block=${BLOCK_SIZE:-128} batch=${BATCH:-8} vocab=${VOCAB:-256}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

printf 'shape: n_layer %s n_embd %s n_head %s block %s batch %s/rank vocab %s, f32, AdamW, %s ranks\n' \
  "$n_layer" "$n_embd" "$n_head" "$block" "$batch" "$vocab" "$nproc_"
ddp_tps=""
for strategy in $strategies; do
  if ! "$build/bin/genesis" --log-level warn launch --nproc "$nproc_" train --preset gpt-tiny \
      --set name="$strategy" --set training.output_dir="\"$out\"" \
      --set distributed.strategy="$strategy" \
      --set model.n_layer=$n_layer --set model.n_embd=$n_embd --set model.n_head=$n_head \
      --set model.block_size=$block --set model.vocab_size=$vocab \
      --set training.per_device_train_batch_size=$batch --set training.optimizer=adamw \
      --set training.max_steps=$steps --set training.logging_steps=$steps \
      --set training.eval_batches=1 --set data.num_samples=$((batch * nproc_ * (steps + 2) * 2)) \
      > "$out/$strategy.log" 2>&1; then
    printf '%-8s failed: %s\n' "$strategy" "$(grep -m1 'error' "$out/$strategy.log" || tail -1 "$out/$strategy.log")"
    continue
  fi
  tps=$(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['tokens_per_s']))" \
    "$out/$strategy/summary.json")
  [ -z "$ddp_tps" ] && [ "$strategy" = ddp ] && ddp_tps=$tps
  if [ -n "$ddp_tps" ]; then
    python3 -c "print('%-8s %8d tokens/s  %5.2fx ddp' % ('$strategy', $tps, $tps / $ddp_tps))"
  else
    printf '%-8s %8d tokens/s\n' "$strategy" "$tps"
  fi
done
