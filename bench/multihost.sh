#!/usr/bin/env bash
# Scaling across hosts, simulated on one machine: each host is a Linux network namespace, the
# two joined by a veth pair whose rate tc's tbf qdisc sets (netem, for a delay, is used only where
# the kernel has it). Trains the GPT shape of bench/gpt_cpu.sh on 1 host x 2 ranks, 1 host x 4
# ranks, and 2 hosts x 2 ranks at each link rate, and prints tokens/s and the scaling efficiency
# (2x2 against twice 1x2; against 1x4 too, which shares the CPUs as the simulated hosts do and so
# isolates what the link costs). Needs root and iproute2.
#
#   bench/multihost.sh [BUILD_DIR]     # env: STEPS (20), RATES ("10gbit 1gbit"; "unshaped": no tbf),
#                                      # DELAY (netem, e.g. 1ms, where the kernel has it)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
genesis=$(cd "$build/bin" && pwd)/genesis
steps=${STEPS:-20}
rates=${RATES:-10gbit 1gbit}
tag=$$
ns=(gbench0-$tag gbench1-$tag)
out=$(mktemp -d)
cleanup() { for n in "${ns[@]}"; do ip netns del "$n" 2> /dev/null || true; done; rm -rf "$out"; }
trap cleanup EXIT

shape=(--set model.n_layer=4 --set model.n_embd=256 --set model.n_head=4 --set model.block_size=128
  --set model.vocab_size=256 --set training.per_device_train_batch_size=8
  --set training.optimizer=adamw --set training.max_steps="$steps" --set training.logging_steps="$steps"
  --set training.eval_batches=1 --set data.num_samples=$((8 * 4 * (steps + 2) * 2)))

make_hosts() {  # make_hosts RATE
  cleanup_ns() { for n in "${ns[@]}"; do ip netns del "$n" 2> /dev/null || true; done; }
  cleanup_ns
  ip netns add "${ns[0]}" && ip netns add "${ns[1]}"
  ip link add "gb0-$tag" type veth peer name "gb1-$tag"
  for i in 0 1; do
    ip link set "gb$i-$tag" netns "${ns[$i]}"
    ip -n "${ns[$i]}" addr add "10.77.0.$((i + 1))/24" dev "gb$i-$tag"
    ip -n "${ns[$i]}" link set "gb$i-$tag" up
    ip -n "${ns[$i]}" link set lo up
    [ "$1" = unshaped ] ||
      ip netns exec "${ns[$i]}" tc qdisc add dev "gb$i-$tag" root handle 1: tbf rate "$1" burst 1mb latency 100ms
    if [ -n "${DELAY:-}" ]; then
      ip netns exec "${ns[$i]}" tc qdisc add dev "gb$i-$tag" parent 1:1 handle 10: netem delay "$DELAY" ||
        echo "netem is not available in this kernel: no delay added" >&2
    fi
  done
}

tokens_per_s() { python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['tokens_per_s']))" "$1"; }

one_host() {  # one_host NPROC
  OMP_NUM_THREADS=1 "$genesis" --log-level warn launch --nproc "$1" train --preset gpt-tiny \
    --set name="one-$1" -o "$out" "${shape[@]}" > /dev/null 2>&1
  tokens_per_s "$out/one-$1/summary.json"
}

two_hosts() {  # two_hosts RATE
  make_hosts "$1"
  for i in 0 1; do
    OMP_NUM_THREADS=1 ip netns exec "${ns[$i]}" "$genesis" --log-level warn launch --nnodes 2 \
      --node-rank "$i" --nproc-per-node 2 --master-addr 10.77.0.1 --master-port 29611 \
      train --preset gpt-tiny --set name="two-$1" -o "$out" "${shape[@]}" > /dev/null 2>&1 &
  done
  wait
  tokens_per_s "$out/two-$1/summary.json"
}

one2=$(one_host 2)
one4=$(one_host 4)
echo "shape: bench/gpt_cpu.sh's GPT (n_layer 4, n_embd 256, block 128, batch 8 per rank), f32 AdamW, DDP, 1 thread per rank, $steps steps"
printf '%-26s %8s tokens/s\n' "1 host x 2 ranks" "$one2" "1 host x 4 ranks" "$one4"
for rate in $rates; do
  two=$(two_hosts "$rate")
  python3 - "$rate" "$two" "$one2" "$one4" <<'PY'
import sys
rate, two, one2, one4 = sys.argv[1], *map(float, sys.argv[2:])
print(f"{'2 hosts x 2 ranks, ' + rate:<26} {two:8.0f} tokens/s  efficiency {two / (2 * one2):.0%} "
      f"of 2x(1x2), {two / one4:.0%} of 1x4")
PY
done
