#!/usr/bin/env bash
# DDP weak scaling on the CPU: the same per-rank batch on 1 rank and on N ranks, one thread each,
# side by side in one run; the ratio of the tokens/s that `genesis train` writes to summary.json
# (all ranks together, training time only) is the speed-up, N at best. Two workloads: the GPT shape
# of bench/gpt_cpu.sh and the mlp preset; each backend given (default: auto and gloo). Each round
# also runs N independent 1-rank jobs at once: their summed tokens/s over one alone is what this
# machine's cores give N processes that never talk (below N where they share caches, memory
# bandwidth or a busy host), the ceiling the N-rank job is measured against. Those jobs log every
# step, and "lockstep" is what they would have given had each step lasted as long as the slowest
# job's same step: the ceiling of ranks that wait for each other every step and spend nothing on
# communication, below "apart" where a machine's step times jitter.
#
#   bench/weak_scaling.sh [BUILD_DIR]      # env: NPROC (2), STEPS (40), BACKENDS ("auto gloo"),
#                                          # ROUNDS (1), WORKLOADS ("gpt mlp"), EXTRA (more --set)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
nproc=${NPROC:-2} steps=${STEPS:-40} backends=${BACKENDS:-auto gloo}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

gpt=(--preset gpt-tiny --set model.n_layer=4 --set model.n_embd=256 --set model.n_head=4
     --set model.block_size=128 --set training.per_device_train_batch_size=8
     --set data.num_samples=4000)
mlp=(--preset mlp)

# tokens/s of one run: train with `$@` after the common settings on `ranks` ranks.
rate() {
  local ranks=$1 name=$2; shift 2
  OMP_NUM_THREADS=1 "$build/bin/genesis" --log-level warn launch --nproc "$ranks" train "$@" \
    --set name="$name" --set training.output_dir="\"$out\"" --set training.max_steps="$steps" \
    --set training.logging_steps="${log_every:-$steps}" --set training.eval_steps=0 \
    --set training.eval_batches=1 > /dev/null
  python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print(round(s['tokens_per_s']))" \
    "$out/$name/summary.json"
}

# tokens/s of N independent 1-rank jobs running at once, summed, and in lockstep (see above).
independent() {
  local name=$1; shift
  local pids=() i
  for i in $(seq "$nproc"); do
    log_every=1 rate 1 "$name-$i" "$@" > "$out/$name-$i.rate" &
    pids+=($!)
  done
  wait "${pids[@]}"
  python3 "$here/lockstep.py" "$out/$name"
}

# ROUNDS rounds, each running 1 rank, N independent ranks and N ranks per backend back to back,
# so that a slow spell of a shared machine lands on every side of a ratio; the median ratios are
# printed last.
for workload in ${WORKLOADS:-gpt mlp}; do
  declare -n args=$workload
  declare -A ratios=()
  for round in $(seq "${ROUNDS:-1}"); do
    one=$(rate 1 "$workload-1-$round" "${args[@]}" ${EXTRA:-})
    read -r apart lockstep < <(independent "$workload-apart-$round" "${args[@]}" ${EXTRA:-})
    ratio=$(python3 -c "print(f'{$apart / $one:.2f}')")
    ratios[apart]+="$ratio "
    printf '%-4s %-5s 1 rank %8s tok/s, %s jobs %9s tok/s: %sx (the ceiling)\n' "$workload" \
      "apart" "$one" "$nproc" "$apart" "$ratio"
    ratio=$(python3 -c "print(f'{$lockstep / $one:.2f}')")
    ratios[lockstep]+="$ratio "
    printf '%-4s %-8s %s jobs waiting for the slowest each step %9s tok/s: %sx\n' "$workload" \
      "lockstep" "$nproc" "$lockstep" "$ratio"
    for backend in $backends; do
      many=$(rate "$nproc" "$workload-$nproc-$backend-$round" "${args[@]}" ${EXTRA:-} \
        --set distributed.backend="\"$backend\"")
      ratio=$(python3 -c "print(f'{$many / $one:.2f}')")
      ratios[$backend]+="$ratio "
      printf '%-4s %-5s 1 rank %8s tok/s, %s ranks %8s tok/s: %sx\n' "$workload" "$backend" "$one" \
        "$nproc" "$many" "$ratio"
    done
  done
  for backend in apart lockstep $backends; do
    printf '%-4s %-5s median of %s: %sx\n' "$workload" "$backend" "${ROUNDS:-1}" \
      "$(python3 -c "import statistics,sys; print(statistics.median(map(float, sys.argv[1:])))" ${ratios[$backend]})"
  done
  unset -n args
done
