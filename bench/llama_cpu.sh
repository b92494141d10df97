#!/usr/bin/env bash
# CPU training throughput of a Llama-shaped Hugging Face model (model.kind = "hf", built fresh
# from a config.json this script writes), genesis vs PyTorch eager, in ROUNDS alternating rounds
# (genesis, torch, genesis, torch, ...) whose medians are compared. genesis's figure is
# summary.json's tokens_per_s (training time only, 3 warm-up steps untimed); PyTorch's comes from
# bench/torch_llama_cpu.py (the same math, optimizer, batch and thread count, on the kernel set
# genesis ran on: summary.json's blas_kernels) and is skipped with a note without python3-torch.
# Checks: both sides count the same parameters and end on a finite loss.
#
#   bench/llama_cpu.sh [BUILD_DIR]    # env: STEPS (20 timed), ROUNDS (3), THREADS (2), BATCH (4),
#                                     # BLOCK_SIZE (256), HIDDEN, LAYERS, HEADS, KV_HEADS, ...
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
steps=${STEPS:-20} rounds=${ROUNDS:-3} threads=${THREADS:-2}
batch=${BATCH:-4} block=${BLOCK_SIZE:-256}
hidden=${HIDDEN:-512} layers=${LAYERS:-8} heads=${HEADS:-8} kv_heads=${KV_HEADS:-2}
head_dim=${HEAD_DIM:-64} intermediate=${INTERMEDIATE:-1408} vocab=${VOCAB:-32000}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# config.json as transformers' LlamaConfig.save_pretrained writes it (untied head, no biases).
cat > "$out/config.json" <<EOF
{
  "architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "hidden_size": $hidden, "intermediate_size": $intermediate, "num_hidden_layers": $layers,
  "num_attention_heads": $heads, "num_key_value_heads": $kv_heads, "head_dim": $head_dim,
  "vocab_size": $vocab, "max_position_embeddings": $((block > 2048 ? block : 2048)),
  "rope_theta": 10000.0, "rope_scaling": null, "rms_norm_eps": 1e-05, "hidden_act": "silu",
  "attention_bias": false, "attention_dropout": 0.0, "mlp_bias": false, "pretraining_tp": 1,
  "tie_word_embeddings": false, "initializer_range": 0.02, "bos_token_id": 1, "eos_token_id": 2,
  "torch_dtype": "float32", "use_cache": true
}
EOF

py=""
for candidate in python3 /usr/bin/python3; do
  if command -v "$candidate" > /dev/null && "$candidate" -c "import torch" 2> /dev/null; then
    py=$candidate
    break
  fi
done
json=${py:-python3}

# genesis_round N: one genesis run; prints "tokens/s parameters blas_kernels".
genesis_round() {
  OMP_NUM_THREADS=$threads "$build/bin/genesis" --log-level warn train \
    --set name="\"llama-cpu-$1\"" --set training.output_dir="\"$out\"" --set seed=0 \
    --set model.kind='"hf"' --set model.config="\"$out/config.json\"" --set model.block_size=$block \
    --set data.source='"synthetic:tokens"' --set data.num_samples=$((batch * (steps + 5) * 2)) \
    --set training.device='"cpu"' --set training.per_device_train_batch_size=$batch \
    --set training.optimizer='"adamw"' --set training.learning_rate=3e-4 \
    --set training.weight_decay=0.1 --set training.max_grad_norm=1.0 \
    --set training.max_steps=$((steps + 3)) --set training.logging_steps=$((steps + 3)) \
    --set training.eval_batches=1 > "$out/genesis-$1.log" 2>&1 ||
    { echo "genesis failed:" >&2; tail -5 "$out/genesis-$1.log" >&2; exit 1; }
  "$json" -c "import json,math,sys; s=json.load(open(sys.argv[1]))
assert s['timed_steps'] == $steps, 'timed %d steps, not $steps' % s['timed_steps']
assert math.isfinite(s['final_loss']), 'genesis: loss %s is not finite' % s['final_loss']
print(round(s['tokens_per_s']), s['num_parameters'], s.get('blas_kernels', '') or '-')" \
    "$out/llama-cpu-$1/summary.json"
  rm -rf "${out:?}/llama-cpu-$1"  # its checkpoint: ~0.7 GB
}

printf 'shape: hidden %s layers %s heads %s kv_heads %s head_dim %s intermediate %s vocab %s untied, ' \
  "$hidden" "$layers" "$heads" "$kv_heads" "$head_dim" "$intermediate" "$vocab"
printf 'block %s batch %s, f32, AdamW, clip 1.0, %s threads, %s timed steps\n' "$block" "$batch" "$threads" "$steps"
[ -n "$py" ] || echo "pytorch        skipped: python3-torch is not installed (apt-get install python3-torch)"

genesis_all=() torch_all=() torch_version="" kernels=""
for ((r = 1; r <= rounds; ++r)); do
  g_result=$(genesis_round "$r")
  read -r g_tps g_params g_kernels <<< "$g_result"
  kernels=${g_kernels#-}
  genesis_all+=("$g_tps")
  line="round $r: genesis $g_tps tokens/s"
  if [ -n "$py" ]; then
    torch_env=()
    [ -n "${OPENBLAS_CORETYPE:-}" ] || [ -z "$kernels" ] || torch_env=("OPENBLAS_CORETYPE=$kernels")
    torch_json=$(env "${torch_env[@]}" "$py" "$here/torch_llama_cpu.py" --hidden "$hidden" \
      --layers "$layers" --heads "$heads" --kv-heads "$kv_heads" --head-dim "$head_dim" \
      --intermediate "$intermediate" --vocab "$vocab" --block-size "$block" --batch "$batch" \
      --steps "$steps" --threads "$threads")
    t_result=$(echo "$torch_json" | "$py" -c "import json,sys
t = json.load(sys.stdin); print(round(t['tokens_per_s']), t['parameters'], t['torch_version'])")
    read -r t_tps t_params torch_version <<< "$t_result"
    [ "$t_params" = "$g_params" ] ||
      { echo "shape mismatch: genesis has $g_params parameters, pytorch $t_params" >&2; exit 1; }
    torch_all+=("$t_tps")
    line+=", pytorch $t_tps tokens/s, $("$py" -c "print('%.2fx' % ($g_tps / $t_tps))")"
  fi
  echo "$line"
done

median() { printf '%s\n' "$@" | sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
printf 'OpenBLAS kernels: %s; parameters: %s\n' "${kernels:-unknown}" "$g_params"
g_med=$(median "${genesis_all[@]}")
printf 'genesis        %8s tokens/s (median of %s)\n' "$g_med" "$rounds"
[ -n "$py" ] || exit 0
t_med=$(median "${torch_all[@]}")
printf 'pytorch %-6s %8s tokens/s (eager, median of %s)\n' "$torch_version" "$t_med" "$rounds"
"$py" -c "print('ratio          %8.2fx genesis / pytorch (target 1.5x)' % ($g_med / $t_med))"
