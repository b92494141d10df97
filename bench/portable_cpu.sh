#!/usr/bin/env bash
# The portable default build (x86-64-v3, AVX-512 kernels chosen at run time) against a build tuned
# for this machine (-DGENESIS_NATIVE=ON) on bench/gpt_cpu.sh's GPT: ROUNDS alternating rounds,
# the median tokens/s of each and their ratio; and the portable build held to its baseline
# kernels (GENESIS_CPU_KERNELS=x86-64-v3), what a CPU without AVX-512 runs. Each round runs
# the builds back to back, so the median of the rounds' own ratios is also given: on a shared
# machine whose speed drifts between rounds it is steadier than the ratio of the medians.
#
#   bench/portable_cpu.sh PORTABLE_BUILD NATIVE_BUILD     # env: ROUNDS (5), and gpt_cpu.sh's
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
portable=$1 native=$2
rounds=${ROUNDS:-5}
tps() { TORCH=0 "$here/gpt_cpu.sh" "$1" | awk '/^genesis /{print $2}'; }
median() { sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
p=() n=() b=()
for ((r = 1; r <= rounds; r++)); do
  p+=("$(tps "$portable")")
  n+=("$(tps "$native")")
  b+=("$(GENESIS_CPU_KERNELS=x86-64-v3 tps "$portable")")
  echo "round $r: portable ${p[-1]} tokens/s, native ${n[-1]}, portable on its baseline kernels ${b[-1]}"
done
pm=$(printf '%s\n' "${p[@]}" | median) nm=$(printf '%s\n' "${n[@]}" | median)
bm=$(printf '%s\n' "${b[@]}" | median)
echo "CPU kernels: portable $("$portable/bin/genesis" doctor 2>/dev/null | grep -o 'CPU kernels [a-z0-9-]*' || true)," \
  "native $("$native/bin/genesis" doctor 2>/dev/null | grep -o 'CPU kernels [a-z0-9-]*' || true)"
awk -v p="$pm" -v n="$nm" -v b="$bm" 'BEGIN {printf "median: portable %d, native %d tokens/s; portable/native %.3f; baseline kernels %d (%.3f of portable)\n", p, n, p / n, b, b / p}'
ratios=$(for ((r = 0; r < rounds; r++)); do awk -v p="${p[r]}" -v n="${n[r]}" 'BEGIN {printf "%.4f\n", p / n}'; done)
echo "rounds' portable/native: $(echo $ratios); median $(echo "$ratios" | median)"
