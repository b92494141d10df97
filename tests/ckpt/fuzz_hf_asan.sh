#!/usr/bin/env bash
# The Hugging Face input fuzzer of tests/ckpt/test_hf_fuzz.cpp built on its own under
# AddressSanitizer and UBSan (any report aborts the run) and run longer than the test suite does:
# the safetensors header checks, config.json and the weights index, without the tensor library.
#
#   tests/ckpt/fuzz_hf_asan.sh [ITERATIONS_PER_TARGET [SEED]]    (default 200000, seed 1)
#
# Builds into build-fuzz-asan/ (BUILD_DIR overrides); exits non-zero on a failure or a sanitizer
# report, leaving each failing input as build-fuzz-asan/fuzz-failure-N.bin.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
iterations=${1:-200000}
seed=${2:-1}
build=${BUILD_DIR:-$root/build-fuzz-asan}
mkdir -p "$build"
cd "$build"

sources=(
  tests/ckpt/test_hf_fuzz.cpp
  lib/src/ckpt/checked_json.cpp
  lib/src/ckpt/hf_weights_index.cpp
  lib/src/ckpt/safetensors_header.cpp
  lib/src/core/error.cpp
  lib/src/nn/hf_config.cpp
)
flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined
       -fno-sanitize-recover=all -DGENESIS_FUZZ_MAIN -I"$root/lib/include" -I"$root/lib/src")
objects=() pids=()
for source in "${sources[@]}"; do
  object=$(basename "${source%.cpp}").o
  ${CXX:-g++} "${flags[@]}" -c "$root/$source" -o "$object" &
  pids+=($!) objects+=("$object")
done
for pid in "${pids[@]}"; do wait "$pid"; done  # set -e: a failed compile stops here
${CXX:-g++} "${flags[@]}" "${objects[@]}" -o fuzz_hf

# halt_on_error: the first report ends the run with a non-zero status, the report on stderr.
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
./fuzz_hf "$iterations" "$seed"
