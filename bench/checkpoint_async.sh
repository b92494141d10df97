#!/usr/bin/env bash
# What checkpoint saves cost a run: GPT-2 124M with AdamW (1.5 GB of training state), 2 CPU
# ranks, block_size 128, batch 1, 20 steps, in three arms run alternately ROUNDS times:
#   end    saves only after the last step (the baseline)
#   async  also saves every 5 steps, asynchronously (training.save_async, the default)
#   sync   also saves every 5 steps, each written before training goes on
# Reported, medians over the rounds (this machine's step times vary by a second from one step to
# the next, so take five rounds at least): wall time of async and sync against end (target: async at
# most 1.05x), the training time one save on the way blocks (checkpoint_blocked_s) against one
# synchronous save (target: at most 15%), and the writers' bandwidth against `dd conv=fsync` of
# the same bytes on the same disk while nothing else runs (target: at least 80%).
#
#   bench/checkpoint_async.sh [BUILD_DIR]   # env: ROUNDS (5), STEPS (20), EVERY (5),
#                                           # WORK (a directory on the disk to measure)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
rounds=${ROUNDS:-5}
steps=${STEPS:-20}
every=${EVERY:-5}
work=$(mktemp -d "${WORK:-${TMPDIR:-/tmp}}/checkpoint-async.XXXXXX")
trap 'rm -rf "$work"' EXIT

run() {  # run ARM ROUND
  local arm=$1 save_steps=$every async=true
  [ "$arm" = end ] && save_steps=0
  [ "$arm" = sync ] && async=false
  "$build/bin/genesis" launch --nproc 2 train --preset gpt2 --set name="\"$arm-$2\"" \
    --set model.block_size=128 --set data.num_samples=200 --set training.device='"cpu"' \
    --set training.mixed_precision='"no"' --set training.per_device_train_batch_size=1 \
    --set training.max_steps="$steps" --set training.logging_steps=1 \
    --set training.save_steps="$save_steps" --set training.save_async="$async" \
    --set training.output_dir="\"$work\"" --overwrite > "$work/$arm-$2.log" 2>&1 ||
    { echo "$arm failed:"; tail -5 "$work/$arm-$2.log"; exit 1; }
  python3 - "$work/$arm-$2" "$arm" "$work/figures" "$work/$arm-$2.log" <<'PY'
import json, pathlib, re, sys
run, arm, out, log = sys.argv[1:]
summary = json.load(open(f"{run}/summary.json"))
blocked_on_way = 0.0  # checkpoint_blocked_s on the last step's log: the saves on the way
for line in open(f"{run}/metrics.jsonl"):
    rec = json.loads(line)
    blocked_on_way = rec.get("checkpoint_blocked_s", blocked_on_way)
log = open(log).read()
# The last step's save is written at once in every arm: its seconds and both ranks' bytes.
final = re.findall(r"saved checkpoint \S+ in ([0-9.]+) s\n", log)[-1]
last = pathlib.Path(run, "checkpoints", "step-%d" % summary["steps"])
step_bytes = sum(f.stat().st_size for f in last.glob("rank-*.safetensors"))  # both ranks
writes = [float(x) for x in re.findall(r"rank 0 wrote \d+ MB in [0-9.]+ s, ([0-9.]+) MB/s", log)]
print(f"  {arm:<5} wall {summary['wall_s']:6.1f} s, saves {summary['checkpoint_saves']}, "
      f"blocked {summary['checkpoint_blocked_s']:.2f} s")
with open(out, "a") as f:
    f.write(json.dumps({"arm": arm, "wall_s": summary["wall_s"], "saves": summary["checkpoint_saves"],
                        "blocked_s": summary["checkpoint_blocked_s"], "blocked_on_way_s": blocked_on_way,
                        "final_save_s": float(final), "step_bytes": step_bytes,
                        "background_mb_s": writes}) + "\n")
PY
  rm -rf "${work:?}/$arm-$2"
}

echo "model: GPT-2 124M (gpt2 preset), f32, AdamW; 2 CPU ranks, block_size 128, batch 1, $steps steps"
for round in $(seq "$rounds"); do
  for arm in end async sync; do run "$arm" "$round"; done
  echo "round $round done"
done

# The disk, with nothing else running: dd of one checkpoint's bytes, flushed before it ends.
bytes=$(python3 -c "import json; print(int(max(json.loads(l)['step_bytes'] for l in open('$work/figures'))))")
count=$(( (bytes + (64 << 20) - 1) / (64 << 20) ))
dd_rate=$(dd if=/dev/zero of="$work/dd.bin" bs=64M count="$count" conv=fsync 2>&1 |
          awk '/copied/ { print $(NF-1), $NF }')
rm -f "$work/dd.bin"

python3 - "$work/figures" "$dd_rate" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
value, unit = sys.argv[2].split()
dd = float(value) * {"kB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9}[unit]
by = lambda arm, key: [r[key] for r in rows if r["arm"] == arm]
med = lambda arm, key: statistics.median(by(arm, key))
end, asyn, syn = med("end", "wall_s"), med("async", "wall_s"), med("sync", "wall_s")
print("wall time, medians: end %.1f s, async %.1f s (%.3fx), sync %.1f s (%.3fx); target async <= 1.05x"
      % (end, asyn, asyn / end, syn, syn / end))
on_way = (len([1 for r in rows if r["arm"] == "async"]) and
          statistics.median(r["blocked_on_way_s"] / (r["saves"] - 1) for r in rows if r["arm"] == "async"))
sync_save = statistics.median(r["blocked_s"] / r["saves"] for r in rows if r["arm"] == "sync")
print("one save on the way blocks training %.3f s; one synchronous save %.3f s: %.1f%% (target <= 15%%)"
      % (on_way, sync_save, 100 * on_way / sync_save))
step_bytes = statistics.median(r["step_bytes"] for r in rows)
final = statistics.median(r["final_save_s"] for r in rows)
print("the last step's save (both ranks, nothing else running): %.0f MB in %.2f s = %.0f MB/s; "
      "dd conv=fsync %.0f MB/s: %.0f%% (target >= 80%%)"
      % (step_bytes / 1e6, final, step_bytes / final / 1e6, dd / 1e6, 100 * step_bytes / final / dd))
bg = [x for r in rows if r["arm"] == "async" for x in r["background_mb_s"]]
if bg:
    print("background writes while training, rank 0: median %.0f MB/s" % statistics.median(bg))
PY
