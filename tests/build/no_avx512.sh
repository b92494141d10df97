#!/bin/bash
# A default build runs on x86-64-v3 CPUs without AVX-512: no function of libgenesis uses an
# AVX-512 instruction but the run-time-chosen kernels in genesis::cpu::avx512 (backends/cpu/isa.hpp),
# and the genesis binary none at all. The check proves it can see AVX-512: those kernels must
# hold some. Usage: no_avx512.sh LIBGENESIS GENESIS_BINARY CPU_BASE_ISA
set -euo pipefail
lib=$1 bin=$2 isa=$3
if [ "$isa" != x86-64-v3 ]; then
  echo "this build's CPU baseline is '$isa' (GENESIS_NATIVE or not x86-64): nothing to check"
  exit 77
fi
command -v objdump > /dev/null || { echo "objdump (binutils) is not installed"; exit 1; }

# Prints "function<TAB>instruction" for the first AVX-512 instruction of each function:
# zmm registers, xmm/ymm 16-31, mask registers, embedded broadcasts, and EVEX-only mnemonics.
avx512_functions() {
  objdump -d -C --no-show-raw-insn "$1" | awk '
    /^[0-9a-f]+ <.*>:$/ { fn = substr($0, index($0, "<") + 1); sub(/>:$/, "", fn); seen = 0; next }
    !seen && (/%zmm[0-9]|%[xy]mm(1[6-9]|2[0-9]|3[01])[^0-9]|%k[0-7][^0-9]|\{%k[0-7]\}|\{1to[0-9]+\}/ ||
              /\tv(movdq[au](8|16|32|64)|pternlog[dq]|perm[it]2|compress|expand|rndscale|reduce[ps]|range[ps]|fixupimm|getexp|getmant|scalef|rcp14|rsqrt14|pro[lr]v?[dq]|pabsq|pm(ax|in)[su]q|pmullq|cvtt?p[sd]2u|cvtu|(extract|insert)[fi](32x[48]|64x[24])|broadcast[fi](32x[248]|64x[24])|align[dq]|pconflict|plzcnt|popcnt[bwdq]|dbpsadbw|pshl[dv]|pshr[dv]|cvtne2?ps2bf16|dpbf16ps|psraq|psravq|blendm|pblendm|fpclass)/) {
      seen = 1; line = $0; sub(/^[ \t]*[0-9a-f]+:[ \t]*/, "", line); printf "%s\t%s\n", fn, line }'
}

found=$(avx512_functions "$lib")
outside=$(printf '%s\n' "$found" | grep -v 'genesis::cpu::avx512::' | grep -v '^$' || true)
inside=$(printf '%s\n' "$found" | grep -c 'genesis::cpu::avx512::' || true)
in_binary=$(avx512_functions "$bin")
status=0
if [ -n "$outside" ]; then
  echo "AVX-512 outside genesis::cpu::avx512 in $lib ($(printf '%s\n' "$outside" | wc -l) functions):"
  printf '%s\n' "$outside" | head -20
  status=1
fi
if [ -n "$in_binary" ]; then
  echo "AVX-512 in $bin:"; printf '%s\n' "$in_binary" | head -20
  status=1
fi
if [ "$inside" -eq 0 ]; then
  echo "no AVX-512 instruction found in genesis::cpu::avx512's kernels: the check cannot see them"
  status=1
fi
[ $status -ne 0 ] || echo "ok: AVX-512 only in the $inside run-time-chosen kernels of genesis::cpu::avx512"
exit $status
