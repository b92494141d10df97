#!/usr/bin/env bash
# The chat-template fuzzer of tests/chat/test_chat_template_fuzz.cpp built on its own under
# AddressSanitizer and UBSan (any report aborts the run) and run longer than the test suite does:
# the lexer, parser and interpreter on mutations of tests/chat/templates/*.jinja and of the
# chat_template of each tokenizer_config.json given.
#
#   tests/chat/fuzz_chat_template_asan.sh [ITERATIONS [SEED [TOKENIZER_CONFIG...]]]
#                                        (default 20000, 1, none)
#
# Builds into build-fuzz-asan/ (BUILD_DIR overrides); exits non-zero on a failure or a sanitizer
# report, leaving each failing template as build-fuzz-asan/fuzz-chat-template-failure-N.jinja.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
iterations=${1:-20000}
seed=${2:-1}
configs=()
for config in "${@:3}"; do configs+=("$(realpath "$config")"); done
build=${BUILD_DIR:-$root/build-fuzz-asan}
mkdir -p "$build"
cd "$build"

sources=(tests/chat/test_chat_template_fuzz.cpp lib/src/core/error.cpp lib/src/core/env.cpp
         lib/src/tokenizer/unicode.cpp)
for source in "$root"/lib/src/chat/*.cpp; do sources+=("${source#"$root"/}"); done
flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined
       -fno-sanitize-recover=all -DGENESIS_FUZZ_MAIN -I"$root/lib/include" -I"$root/lib/src")
objects=() pids=()
for source in "${sources[@]}"; do
  object=chat-$(basename "${source%.cpp}").o
  ${CXX:-g++} "${flags[@]}" -c "$root/$source" -o "$object" &
  pids+=($!) objects+=("$object")
done
for pid in "${pids[@]}"; do wait "$pid"; done  # set -e: a failed compile stops here
${CXX:-g++} "${flags[@]}" "${objects[@]}" -o fuzz_chat_template -licuuc -licudata

export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
./fuzz_chat_template "$root/tests/chat/templates" "$iterations" "$seed" "${configs[@]}"
