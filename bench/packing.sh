#!/usr/bin/env bash
# What data.packing gains on examples of mixed lengths: `genesis train` twice, back to back, on the
# same SFT pairs (seeded, byte tokens, mostly short with a long tail, as chat data is) with a small
# GPT and block_size 512, once one example per row and once packed; the figure is the ratio of
# summary.json's real_tokens_per_s (input tokens that are not padding, per second), beside each
# run's tokens_per_s and the share of real tokens in its rows. Checks: both runs finish with a
# finite loss, the packed run says how it packed, and its rows are at least 90% real tokens.
#
#   bench/packing.sh [BUILD_DIR]    # env: STEPS (30), EXAMPLES (4000), THREADS (all cores)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
genesis=$build/bin/genesis
steps=${STEPS:-30}
examples=${EXAMPLES:-4000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[ -n "${THREADS:-}" ] && export OMP_NUM_THREADS=$THREADS

# Pairs of 4 to 500 characters in all: 60% under 100, 30% to 300, 10% to 500.
/usr/bin/python3 - "$examples" > "$work/data.jsonl" <<'EOF'
import json, random, sys
rng = random.Random(7)
words = "the of and to in is that for it as was with be by on not he this are or".split()
def text(n):
    out = ""
    while len(out) < n:
        out += rng.choice(words) + " "
    return out[:n]
for _ in range(int(sys.argv[1])):
    r = rng.random()
    n = (rng.randint(4, 100) if r < 0.6 else rng.randint(100, 300) if r < 0.9
         else rng.randint(300, 500))
    cut = max(1, n // 3)
    print(json.dumps({"prompt": text(cut), "response": text(n - cut)}))
EOF

run() {
  "$genesis" train --preset sft -o "$work/runs" --name "$1" \
    --set data.source=jsonl:"$work/data.jsonl" --set data.cache_dir="$work/cache" \
    --set model.block_size=512 --set model.n_layer=2 --set model.n_embd=128 --set model.n_head=4 \
    --set training.max_steps="$steps" --set training.train_batch_size=8 \
    --set training.per_device_train_batch_size=8 --set training.logging_steps="$steps" \
    --set training.eval_steps=0 --set training.eval_batches=1 --set data.packing="$2" \
    > "$work/$1.log" 2>&1 || { tail -5 "$work/$1.log" >&2; exit 1; }
}
field() { /usr/bin/python3 -c "import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" \
  "$work/runs/$1/summary.json" "$2"; }

run padded false
run packed true
grep -o 'data.packing: .*' "$work/packed.log" || { echo "the packed run did not pack" >&2; exit 1; }
for name in padded packed; do
  loss=$(field "$name" final_loss)
  /usr/bin/python3 -c "import math, sys; sys.exit(0 if math.isfinite(float(sys.argv[1])) else 1)" \
    "$loss" || { echo "$name: loss $loss" >&2; exit 1; }
  printf '%s: tokens_per_s %.0f, real_tokens_per_s %.0f (%.1f%% of row tokens real), loss %.3f\n' \
    "$name" "$(field "$name" tokens_per_s)" "$(field "$name" real_tokens_per_s)" \
    "$(/usr/bin/python3 -c "import sys; print(100 * float(sys.argv[1]) / float(sys.argv[2]))" \
       "$(field "$name" real_tokens_per_s)" "$(field "$name" tokens_per_s)")" "$loss"
done
/usr/bin/python3 - "$(field packed real_tokens_per_s)" "$(field packed tokens_per_s)" \
  "$(field padded real_tokens_per_s)" <<'EOF'
import sys
packed_real, packed_all, padded_real = map(float, sys.argv[1:])
if packed_real < 0.9 * packed_all:
    sys.exit(f"packed rows are only {100 * packed_real / packed_all:.1f}% real tokens")
print(f"packing: real_tokens_per_s x{packed_real / padded_real:.2f}")
EOF
