#!/usr/bin/env bash
# The tokenizer.json fuzzer of tests/tokenizer/test_tokenizer_fuzz.cpp built on its own under
# AddressSanitizer and UBSan (any report aborts the run) and run longer than the test suite does:
# the whole tokenizer (file reading, added tokens, normalizers, pre-tokenizers, BPE, decoders).
#
#   tests/tokenizer/fuzz_tokenizer_asan.sh TOKENIZER_JSON [ITERATIONS [SEED]]   (default 5000, 1)
#
# Builds into build-fuzz-asan/ (BUILD_DIR overrides); exits non-zero on a failure or a sanitizer
# report, leaving each failing file as build-fuzz-asan/fuzz-tokenizer-failure-N.json.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
seed_file=$(realpath "${1:?usage: fuzz_tokenizer_asan.sh TOKENIZER_JSON [ITERATIONS [SEED]]}")
iterations=${2:-5000}
seed=${3:-1}
build=${BUILD_DIR:-$root/build-fuzz-asan}
mkdir -p "$build"
cd "$build"

sources=(tests/tokenizer/test_tokenizer_fuzz.cpp lib/src/core/error.cpp)
for source in "$root"/lib/src/tokenizer/*.cpp; do
  # The JSONL driver needs the checkpoint library (Hub ids); the fuzzer does not.
  [[ $source == */tokenize_jsonl.cpp ]] || sources+=("${source#"$root"/}")
done
flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined
       -fno-sanitize-recover=all -DGENESIS_FUZZ_MAIN -I"$root/lib/include" -I"$root/lib/src")
objects=() pids=()
for source in "${sources[@]}"; do
  object=$(basename "${source%.cpp}").o
  ${CXX:-g++} "${flags[@]}" -c "$root/$source" -o "$object" &
  pids+=($!) objects+=("$object")
done
for pid in "${pids[@]}"; do wait "$pid"; done  # set -e: a failed compile stops here
${CXX:-g++} "${flags[@]}" "${objects[@]}" -o fuzz_tokenizer -lpcre2-8 -licuuc -licudata

export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
./fuzz_tokenizer "$seed_file" "$iterations" "$seed"
