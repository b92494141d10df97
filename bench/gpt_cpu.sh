#!/usr/bin/env bash
# CPU training throughput of the GPT model, genesis vs PyTorch eager, side by side in one run.
# genesis's figure is the tokens_per_s that `genesis train` writes to summary.json (training
# time only); PyTorch's comes from bench/torch_gpt_cpu.py on the same shape, optimizer, batch and
# thread count, and is skipped (with a note) when python3-torch is not installed. Debian's torch
# calls the same OpenBLAS; it runs on the kernel set genesis ran on (summary.json's blas_kernels),
# since an old OpenBLAS left to itself may pick SSE3 kernels on a new CPU (README, Threads).
#
#   bench/gpt_cpu.sh [BUILD_DIR]      # env: STEPS (30), THREADS (all cores), N_LAYER, N_EMBD, ...
#                                     # TORCH=0 leaves PyTorch out
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
steps=${STEPS:-30}
threads=${THREADS:-$(nproc)}
n_layer=${N_LAYER:-4} n_embd=${N_EMBD:-256} n_head=${N_HEAD:-4}
block=${BLOCK_SIZE:-128} batch=${BATCH:-8} vocab=${VOCAB:-256}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

OMP_NUM_THREADS=$threads "$build/bin/genesis" --log-level warn train --preset gpt-tiny \
  --set name=bench-gpt-cpu --set training.output_dir="\"$out\"" \
  --set model.n_layer=$n_layer --set model.n_embd=$n_embd --set model.n_head=$n_head \
  --set model.block_size=$block --set model.vocab_size=$vocab \
  --set training.per_device_train_batch_size=$batch --set training.optimizer=adamw \
  --set training.max_steps=$steps --set training.logging_steps=$steps \
  --set training.eval_batches=1 --set data.num_samples=$((batch * (steps + 2) * 2)) > /dev/null
read -r genesis_tps kernels < <(python3 -c "import json,sys; s=json.load(open(sys.argv[1]))
print(round(s['tokens_per_s']), s.get('blas_kernels', ''))" "$out/bench-gpt-cpu/summary.json")
printf 'shape: n_layer %s n_embd %s n_head %s block %s batch %s vocab %s, f32, AdamW, %s threads\n' \
  "$n_layer" "$n_embd" "$n_head" "$block" "$batch" "$vocab" "$threads"
printf 'OpenBLAS kernels: %s\n' "${kernels:-unknown}"
printf 'genesis        %8s tokens/s\n' "$genesis_tps"

[ "${TORCH:-1}" != 0 ] || exit 0
py=""
for candidate in python3 /usr/bin/python3; do
  if command -v "$candidate" > /dev/null && "$candidate" -c "import torch" 2> /dev/null; then
    py=$candidate
    break
  fi
done
if [ -z "$py" ]; then
  echo "pytorch        skipped: python3-torch is not installed (apt-get install python3-torch)"
  exit 0
fi
torch_env=()
[ -n "${OPENBLAS_CORETYPE:-}" ] || [ -z "$kernels" ] || torch_env=("OPENBLAS_CORETYPE=$kernels")
torch_json=$(env "${torch_env[@]}" "$py" "$here/torch_gpt_cpu.py" --n-layer "$n_layer" --n-embd "$n_embd" --n-head "$n_head" \
  --block-size "$block" --batch "$batch" --vocab "$vocab" --steps "$steps" --threads "$threads")
torch_tps=$(echo "$torch_json" | "$py" -c "import json,sys; print(round(json.load(sys.stdin)['tokens_per_s']))")
torch_version=$(echo "$torch_json" | "$py" -c "import json,sys; print(json.load(sys.stdin)['torch_version'])")
printf 'pytorch %-6s %8s tokens/s (eager)\n' "$torch_version" "$torch_tps"
"$py" -c "print('ratio          %8.2fx genesis / pytorch' % ($genesis_tps / $torch_tps))"
