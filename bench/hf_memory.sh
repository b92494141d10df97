#!/usr/bin/env bash
# Peak resident memory per rank of ddp and zero3 training a Qwen3-0.6B-shaped model (random
# weights, written as a 4-shard BF16 Hugging Face checkpoint by tests/golden/hf_reference.py) on
# the CPU: 2 ranks, batch 1, sequence 256, f32 training, AdamW; figures from summary.json (each
# rank's resident peak, its peak of live host tensors, the plan's estimate and state per rank).
# The target: zero3's peak per rank at most 55% of ddp's. Check: both strategies start from the
# same weights and batches, so they must end on the same loss. "lora" in STRATEGIES runs ddp with
# LoRA adapters (r=16 on all linear layers, the base stored in bf16) beside them: its peak at most
# 25% of full fine-tuning's under ddp, and its step at most 0.6x ddp's (tokens/s measured in the
# same run, over the timed steps). Writing the checkpoint needs
# python3-torch (skipped with a note without it) and ~1.2 GB; each run's checkpoint is deleted.
#
#   bench/hf_memory.sh [BUILD_DIR]    # env: STEPS (3), STRATEGIES ("ddp zero3"; "ddp lora"),
#                                     # MODEL_DIR (kept: used as it is when it holds a
#                                     # config.json, else the checkpoint is written there)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
steps=${STEPS:-3}
strategies=${STRATEGIES:-ddp zero3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

model=${MODEL_DIR:-}
if [ -z "$model" ] || [ ! -f "$model/config.json" ]; then
  py=""
  for candidate in python3 /usr/bin/python3; do
    if command -v "$candidate" > /dev/null && "$candidate" -c "import torch" 2> /dev/null; then
      py=$candidate
      break
    fi
  done
  if [ -z "$py" ]; then
    echo "skipped: writing the checkpoint needs python3-torch (apt-get install python3-torch)"
    exit 0
  fi
  model=${model:-$work/qwen3-0.6b}
  "$py" "$here/../tests/golden/hf_reference.py" make --family qwen3 --hidden 1024 --layers 28 \
    --heads 16 --kv-heads 8 --head-dim 128 --intermediate 3072 --vocab 151936 --max-pos 40960 \
    --tied --dtype bfloat16 --shards 4 --out "$model" > /dev/null
fi

echo "model: Qwen3-0.6B shape (hidden 1024, 28 layers, 16/8 heads, head_dim 128, vocab 151936, tied), BF16 checkpoint"
echo "run: 2 ranks, batch 1, sequence 256, f32, AdamW, $steps steps"
printf '%-8s %-18s %-18s %-11s %s\n' strategy "peak RSS (MB)" "peak tensors (MB)" "plan (MiB)" \
  "state per rank (MiB: params/grads/optimizer)"
for s in $strategies; do
  strategy=$s extra=()
  if [ "$s" = lora ]; then
    strategy=ddp
    extra=(--set lora.r=16 --set lora.lora_alpha=32 --set lora.target_modules='"all-linear"'
           --set lora.base_dtype='"bf16"')
  fi
  "$build/bin/genesis" launch --nproc 2 train --set name="\"hf-memory-$s\"" "${extra[@]}" \
    --set model.init_from="\"$model\"" --set model.block_size=256 \
    --set data.source='"synthetic:tokens"' --set data.num_samples=$((4 * (steps + 2))) \
    --set training.device='"cpu"' --set training.per_device_train_batch_size=1 \
    --set training.max_steps="$steps" --set training.logging_steps="$steps" \
    --set training.eval_batches=1 --set distributed.strategy="\"$strategy\"" \
    --set training.output_dir="\"$work\"" --overwrite > "$work/$s.log" 2>&1 ||
    { echo "$s failed:"; tail -5 "$work/$s.log"; exit 1; }
  python3 - "$work/hf-memory-$s/summary.json" "$s" "$work/figures" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
m, mib = d["memory_per_rank_bytes"], 1 << 20
rss = "/".join(str(round(x)) for x in d["peak_rss_mb_per_rank"])
tensors = "/".join(str(round(x)) for x in d["peak_host_tensor_mb_per_rank"])
state = "/".join(str(round(m[k] / mib)) for k in ("parameters", "gradients", "optimizer_state"))
print(f"{sys.argv[2]:<8} {rss:<18} {tensors:<18} {round(d['memory_estimate_mb']):<11} {state}")
with open(sys.argv[3], "a") as f:
    f.write(f"{sys.argv[2]} {max(d['peak_rss_mb_per_rank'])} {d['final_loss']} {d['tokens_per_s']}\n")
PY
  rm -rf "${work:?}/hf-memory-$s"  # its checkpoint: the f32 weights and AdamW's state, ~7 GB
done

python3 - "$work/figures" <<'PY'
import math, sys
rows = {s: tuple(map(float, rest)) for s, *rest in (l.split() for l in open(sys.argv[1]))}
if "ddp" in rows and "lora" in rows:
    (ddp, _, ddp_tps), (lora, _, lora_tps) = rows["ddp"], rows["lora"]
    print(f"lora / ddp peak RSS per rank: {lora:.0f} / {ddp:.0f} MB = {100 * lora / ddp:.1f}% (target <= 25%)")
    print(f"lora / ddp step time: {ddp_tps / lora_tps:.2f}x (target <= 0.6x; {lora_tps:.0f} vs {ddp_tps:.0f} tokens/s)")
if "ddp" in rows and "zero3" in rows:
    (ddp, ddp_loss, _), (z3, z3_loss, _) = rows["ddp"], rows["zero3"]
    print(f"zero3 / ddp peak RSS per rank: {z3:.0f} / {ddp:.0f} MB = {100 * z3 / ddp:.1f}% (target <= 55%)")
    same = math.isclose(ddp_loss, z3_loss, rel_tol=1e-3)
    print(f"check: final loss ddp {ddp_loss:.5f}, zero3 {z3_loss:.5f}: {'agree' if same else 'DIFFER'}")
    sys.exit(0 if same else 1)
PY
