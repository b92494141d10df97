#!/usr/bin/env bash
# The GPU check, one command on a machine with an NVIDIA GPU: configure for sm_80 and sm_90
# (never `native` alone), build, run every [cuda] test with GENESIS_REQUIRE_GPU=1 (a skip is a
# failure), genesis doctor, the NCCL bench on 2 ranks sharing GPU 0, GPT-2 124M against PyTorch,
# the SFT preset on the GPU against the CPU, and the export read back by transformers. Each stage
# logs to OUT/<stage>.log; OUT/gpu_report.txt gets one line per stage (PASS/FAIL, seconds, the
# figure that matters) and is all a reader needs.
#
#   bench/gpu_check.sh [STAGE...]    # default: all stages; env OUT (./gpu-check), BUILD (./build-gpu),
#                                    # RUNS (OUT/runs), STAGE_TIMEOUT (1800 s), CPU_EXACT_MATCH,
#                                    # CUDA_TESTS (a test filter instead of every [cuda] test)
#   bench/gpu_check.sh fetch-deps    # on a Debian machine with network: the build's Debian
#                                    # packages as .deb files into .deps/, for a GPU machine
#                                    # that has a compiler and CMake but cannot install packages
#   bench/gpu_check.sh bundle        # on the machine that built BUILD with CUDA: its binaries and
#                                    # their Debian libraries into .gpu/bundle.tar.xz; on the GPU
#                                    # machine the script then unpacks it and skips the build stage
# Stages: build cuda-tests doctor nccl-bench gpt2 sft hf hf-families memory, and profile (Nsight
# Compute over the gpt2 preset's steady state; not in the default list). hf-families: tiny random
# checkpoints of llama, mistral, qwen2, qwen3 and gpt2 (tests/golden/hf_reference.py), scored and
# decoded by genesis on the GPU and the CPU and by transformers' own models of their config.json.
# A stage's failure does not stop the others; the exit status is 1 when any failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/gpu-check}
runs=${RUNS:-$out/runs} # run directories and the export, apart from the logs
build=${BUILD:-$root/build-gpu}
deps=$root/.deps
packages=(libcli11-dev libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 libtomlplusplus-dev
  libtomlplusplus3 catch2 nlohmann-json3-dev libopenblas-openmp-dev libopenblas0-openmp
  libopenblas-dev libgfortran5 libgloo-dev libgloo0 libhiredis-dev libhiredis0.14 libibverbs-dev
  libibverbs1 libnl-3-200 libnl-route-3-200 libnl-3-dev libnl-route-3-dev)

if [ "${1:-}" = fetch-deps ]; then
  mkdir -p "$deps" && cd "$deps" && apt-get download "${packages[@]}"
  exit
fi

mkdir -p "$out"
report=$out/gpu_report.txt
failed=0
genesis=$build/bin/genesis

# bundle: what a built tree needs to run elsewhere (binaries, libgenesis, presets, the test
# sources' path) and every library it links that is neither CUDA's nor the C library's.
make_bundle() {
  local stage=$root/.gpu/stage
  rm -rf "$stage" && mkdir -p "$stage/lib" "$stage/tree" || return 1
  local rel=${build#"$root"/}
  (cd "$root" && cp -a --parents "$rel/bin/genesis" "$rel/bin/genesis_tests" "$rel/lib" \
    "$rel/share" "$stage/tree/") || return 1
  ldd "$build/bin/genesis_tests" "$build/lib/libgenesis.so" | awk '/=> \//{print $3}' | sort -u |
    grep -vE 'libc\.so|libm\.so|libdl|libpthread|librt|ld-linux|libstdc|libgcc_s|libgenesis|libcublas|libnccl' |
    xargs -I{} cp -L {} "$stage/lib/"
  grep -m1 '^CMAKE_HOME_DIRECTORY' "$build/CMakeCache.txt" | cut -d= -f2 > "$stage/source_dir"
  tar -C "$stage" -cJf "$root/.gpu/bundle.tar.xz" . && rm -rf "$stage" &&
    du -h "$root/.gpu/bundle.tar.xz"
}

# A carried bundle, unpacked in place of a build: the tests name the source directory they were
# built from, so that path points here when it is free.
use_bundle() {
  local bundle=$root/.gpu/bundle.tar.xz dir=$root/.gpu/unpacked
  [ -f "$bundle" ] || return 1
  if [ ! "$dir/source_dir" -nt "$bundle" ]; then  # unpacked once per bundle
    rm -rf "$dir" && mkdir -p "$dir" && tar -C "$dir" -xJf "$bundle" && touch "$dir/source_dir" &&
      cp -a "$dir/tree/." "$root/" || return 1
  fi
  local src; src=$(cat "$dir/source_dir")
  [ -e "$src" ] || { mkdir -p "$(dirname "$src")" && ln -s "$root" "$src"; }
  local cuda_dirs
  cuda_dirs=$(find /usr/local /opt /usr/lib -name 'libcublasLt.so.13' -o -name 'libnccl.so.2' 2>/dev/null |
    xargs -r -n1 dirname | sort -u | tr '\n' ':')
  export LD_LIBRARY_PATH=$build/lib:$dir/lib:$cuda_dirs${LD_LIBRARY_PATH:-}
  echo "bundle unpacked from $src; libraries: $LD_LIBRARY_PATH"
  ldd "$build/bin/genesis_tests" | grep 'not found'
  return 0
}

# The carried .deb files, unpacked into a private prefix (never over the machine's own /usr),
# when the machine lacks the packages; Debian's CMake files name /usr, so they are pointed there.
use_carried_deps() {
  [ -f /usr/share/cmake/Gloo/GlooConfig.cmake ] && return
  [ -d "$deps" ] || { echo "no Debian packages and no $deps: run bench/gpu_check.sh fetch-deps" \
    "on a Debian machine first" >&2; return 1; }
  local prefix=$root/.deps-root arch=x86_64-linux-gnu
  if [ ! -d "$prefix" ]; then
    mkdir -p "$prefix"
    for f in "$deps"/*.deb; do
      if command -v dpkg-deb > /dev/null; then dpkg-deb -x "$f" "$prefix"
      else (cd "$prefix" && ar p "$f" data.tar.xz | tar -xJ); fi
    done
    grep -rlZ '/usr/' "$prefix/usr" --include='*.cmake' | xargs -0 -r sed -i "s#\([\" ;]\)/usr/#\1$prefix/usr/#g"
  fi
  export CMAKE_PREFIX_PATH=$prefix/usr
  export LD_LIBRARY_PATH=$prefix/usr/lib/$arch:$prefix/usr/lib/$arch/openblas-openmp:$prefix/usr/lib:${LD_LIBRARY_PATH:-}
}

# stage NAME SUMMARY_COMMAND -- COMMAND...: runs COMMAND into OUT/NAME.log and writes a report
# line; SUMMARY_COMMAND (may be "") prints the figure that matters from the log.
stage() {
  local name=$1 summary=$2; shift 3
  local start=$SECONDS status=PASS
  timeout --kill-after=10 "${STAGE_TIMEOUT:-1800}" bash -c '"$@"' _ "$@" > "$out/$name.log" 2>&1 ||
    { status=FAIL; failed=1; }
  local figure=""
  [ -n "$summary" ] && figure=$(bash -c "$summary" < "$out/$name.log" 2> /dev/null | tr '\n' ' ')
  printf '%-11s %s %5ds  %s\n' "$name" "$status" $((SECONDS - start)) "$figure" | tee -a "$report"
}

do_build() {
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DGENESIS_CUDA=ON \
    "-DCMAKE_CUDA_ARCHITECTURES=80-real;90" &&
    cmake --build "$build" -j"$(nproc)"
}

# The two ctest entries labelled cuda, run straight from the binary (a carried bundle has no
# CTest files); both run even when the first fails.
cuda_tests() {
  local rc=0
  if [ -n "${CUDA_TESTS:-}" ]; then  # a chosen subset, e.g. "[op_table]"
    "$build/bin/genesis_tests" "$CUDA_TESTS"
    return
  fi
  "$build/bin/genesis_tests" "[cuda]~[cuda_ranks]" || rc=1
  "$build/bin/genesis_tests" "[cuda_ranks]" || rc=1
  return $rc
}

# Two ranks on the one GPU: each claims its own host for NCCL, both pinned to device 0.
nccl_bench() {
  CUDA_VISIBLE_DEVICES=0 "$genesis" launch --nproc 2 -- sh -c \
    "NCCL_HOSTID=h\$RANK exec '$genesis' bench-allreduce --backend nccl -b 1K -e 256M"
}

# CPU_EXACT_MATCH (percent) stands in for the CPU run when it was measured elsewhere.
sft_pair() {
  "$genesis" launch --gpus 1 train --preset sft -o "$runs" --set name=sft-gpu --overwrite || return 1
  if [ -z "${CPU_EXACT_MATCH:-}" ]; then
    "$genesis" launch --nproc 2 train --preset sft -o "$runs" --set name=sft-cpu \
      --set training.device=cpu --overwrite || return 1
  fi
  python3 - "$runs" <<'PY'
import json, os, sys
gpu = json.load(open(f"{sys.argv[1]}/sft-gpu/summary.json"))
g = 100 * gpu["eval_exact_match"]
c = os.environ.get("CPU_EXACT_MATCH")
c = float(c) if c else 100 * json.load(open(f"{sys.argv[1]}/sft-cpu/summary.json"))["eval_exact_match"]
print(f"exact match gpu {g:.1f}% cpu {c:.1f}% ({gpu['device_name']}, {gpu['tokens_per_s']:.0f} tok/s)")
sys.exit(0 if abs(g - c) <= 2 else 1)
PY
}

# ZeRO-3 against DDP on device memory: GPT-2 124M, 2 ranks sharing GPU 0 (each its own NCCL
# host), the peak device memory per rank from summary.json; zero3 must peak 40% below ddp.
memory_pair() {
  for s in ddp zero3; do
    CUDA_VISIBLE_DEVICES=0 "$genesis" launch --nproc 2 -- sh -c "NCCL_HOSTID=h\$RANK exec \
      '$genesis' train --preset gpt2 --set training.device=cuda --set model.block_size=128 \
      --set training.per_device_train_batch_size=1 --set training.max_steps=4 \
      --set distributed.strategy=$s -o '$runs' --set name=memory-$s --overwrite" || return 1
  done
  python3 - "$runs" <<'PY'
import json, sys
peak = {s: max(json.load(open(f"{sys.argv[1]}/memory-{s}/summary.json"))["peak_device_memory_mb_per_rank"])
        for s in ("ddp", "zero3")}
print(f"device peak ddp {peak['ddp']:.0f} MB zero3 {peak['zero3']:.0f} MB "
      f"({100 * (1 - peak['zero3'] / peak['ddp']):.0f}% below)")
sys.exit(0 if peak["zero3"] <= 0.6 * peak["ddp"] else 1)
PY
}

# Nsight Compute over the steady state of the gpt2 preset (kernel durations only, clocks as found),
# against the step's wall-clock time in a run without the profiler: where the GPU's time goes,
# and how long a step leaves it waiting for the host.
profile_gpt2() {
  local dir=$runs/profile ncu_bin
  ncu_bin=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2> /dev/null | head -1)
  [ -n "$ncu_bin" ] || { echo "no ncu on this machine"; return 1; }
  gpt2_run() {
    "$@" "$genesis" --log-level warn train --preset gpt2 --set training.device=cuda -o "$dir" \
      --overwrite --set name=wall --set training.max_steps=10 --set training.logging_steps=10 \
      --set data.num_samples=208
  }
  gpt2_run env > /dev/null || return 1
  local wall_ms
  wall_ms=$(python3 -c "import json,sys; print(16384e3 / json.load(open(sys.argv[1]))['tokens_per_s'])" \
    "$dir/wall/summary.json") || return 1
  gpt2_run "$ncu_bin" --clock-control none --metrics gpu__time_duration.sum --csv \
    --launch-skip "${PROFILE_SKIP:-4000}" --launch-count "${PROFILE_COUNT:-4000}" > "$out/profile.csv" || return 1
  python3 "$root/bench/kernel_profile.py" "$out/profile.csv" "$wall_ms"
}

hf_check() {
  mkdir -p "$runs/export" &&
    "$genesis" ckpt export "$runs/sft-gpu" -o "$runs/export/model.safetensors" --force &&
    python3 "$root/bench/hf_greedy_check.py" "$runs/sft-gpu" "$runs/export"
}

# Each family's checkpoint: genesis on cuda against transformers (log-probs within 1e-3, the same
# greedy answers) and against genesis on the CPU.
hf_families() {
  local dir="$out/hf-families" failed_any=0
  mkdir -p "$dir"
  printf '%s\n' '{"ids": [5, 17, 33, 100, 250, 7, 9, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50]}' \
    '{"ids": [11, 12, 13]}' '{"ids": [200, 201, 202, 203, 204, 205, 206, 207, 208]}' > "$dir/ids.jsonl"
  for family in "llama --kv-heads 2" "llama --tied --kv-heads 1 --rope-scaling llama3" \
      "mistral --window 6" "qwen2 --window 5 --max-window-layers 1" \
      "qwen3 --dtype bfloat16 --shards 3" "gpt2"; do
    rm -rf "$dir/model"
    # shellcheck disable=SC2086
    python3 "$root/tests/golden/hf_reference.py" make --out "$dir/model" --family $family > /dev/null || return 1
    for device in cuda cpu; do
      "$genesis" score "$dir/model" -i "$dir/ids.jsonl" --device $device > "$dir/score.$device" &&
        "$genesis" generate "$dir/model" -i "$dir/ids.jsonl" --device $device --max-new-tokens 12 \
          > "$dir/generate.$device" || return 1
    done
    echo "== $family"
    python3 "$root/bench/hf_transformers_check.py" "$dir/model" "$dir/ids.jsonl" "$dir/score.cuda" \
      "$dir/generate.cuda" 12 || failed_any=1
    python3 - "$dir/score.cuda" "$dir/score.cpu" <<'PY' || failed_any=1
import json, sys
a, b = ([json.loads(l)["logprobs"] for l in open(p)] for p in sys.argv[1:3])
worst = max(abs(x - y) for u, v in zip(a, b) for x, y in zip(u, v))
print("cuda vs cpu: max |log-prob diff| %.2e" % worst)
sys.exit(0 if worst <= 1e-3 else 1)
PY
    cmp -s "$dir/generate.cuda" "$dir/generate.cpu" || { echo "cuda and cpu greedy answers differ"; failed_any=1; }
  done
  [ $failed_any = 0 ] && echo "hf-families: all families agree"
  return $failed_any
}

if [ "${1:-}" = bundle ]; then
  make_bundle
  exit
fi
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(build cuda-tests doctor nccl-bench gpt2 sft hf hf-families memory)
if use_bundle; then
  bundled=1
else
  bundled=0
  use_carried_deps || exit 1
fi
export GENESIS_REQUIRE_GPU=1 genesis out runs root build
export -f do_build cuda_tests nccl_bench sft_pair hf_check hf_families memory_pair profile_gpt2
{ date -u +"%F %T UTC"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } \
  2>&1 | tee -a "$report"
for s in "${stages[@]}"; do
  case $s in
    build) [ $bundled = 1 ] && continue; stage build "tail -1" -- do_build ;;
    cuda-tests) stage cuda-tests "grep -E '^All tests passed|^test cases:'" -- cuda_tests ;;
    doctor) stage doctor "grep -cE '^\s*FAIL' | sed 's/$/ failed checks/'" -- "$genesis" doctor ;;
    nccl-bench) stage nccl-bench "grep -E 'Out of bounds|Avg bus' | tr -s ' '" -- nccl_bench ;;
    gpt2) stage gpt2 "grep -E 'genesis|pytorch'" -- "$root/bench/gpt_cuda.sh" "$build" ;;
    sft) stage sft "tail -1" -- sft_pair ;;
    hf) stage hf "tail -1" -- hf_check ;;
    hf-families) stage hf-families "tail -1" -- hf_families ;;
    memory) stage memory "tail -1" -- memory_pair ;;
    profile) stage profile "grep -m1 'GPU busy'" -- profile_gpt2 ;;
    *) echo "unknown stage '$s' (build cuda-tests doctor nccl-bench gpt2 sft hf hf-families memory profile)" >&2; exit 2 ;;
  esac
done
exit $failed
