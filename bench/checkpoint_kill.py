#!/usr/bin/env python3
"""Kills a training run at moments drawn uniformly over an asynchronous save, and resumes it.

A 2-rank `genesis launch` run of GPT-2's shape at 4 layers (AdamW, f32, block_size 128) saves
every 2 steps, the saves of steps 2, 4 and 6 in the background. A calibration run measures the
save of step 4, from its step's log line (the snapshot starts right after it) to the line that
says it committed; each of KILLS runs is then SIGKILLed, launcher and ranks together, at a moment
drawn uniformly over that window, resumed with --resume auto, and must end on the bytes of a run
that was never killed. Prints where each kill landed, where the run resumed from, and the count
that matched (the target: all of them).

    bench/checkpoint_kill.py [BUILD_DIR]    # env: KILLS (20), SEED (1)
"""
import os
import pathlib
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
BUILD = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else HERE.parent / "build")
GENESIS = str(BUILD / "bin" / "genesis")
KILLS = int(os.environ.get("KILLS", "20"))
SETS = ["model.n_layer=4", "model.block_size=128", "data.num_samples=200",
        "training.device=\"cpu\"", "training.mixed_precision=\"no\"",
        "training.per_device_train_batch_size=1", "training.max_steps=8",
        "training.logging_steps=1", "training.save_steps=2", "training.eval_batches=1",
        "training.resume_from_checkpoint=\"auto\""]
ENV = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="passive")


def command(out):
    args = [GENESIS, "launch", "--nproc", "2", "train", "--preset", "gpt2", "-o", str(out),
            "--name", "run"]
    for s in SETS:
        args += ["--set", s]
    return args


def start(out, log):
    return subprocess.Popen(command(out), stdout=log, stderr=subprocess.STDOUT, env=ENV,
                            start_new_session=True)


def wait_for(path, pattern, proc, since=0.0):
    """Seconds (monotonic) when `pattern` first appears in the file, or None if proc ends first."""
    while True:
        text = path.read_text(errors="replace") if path.exists() else ""
        if re.search(pattern, text):
            return time.monotonic()
        if proc.poll() is not None:
            return None
        time.sleep(0.002)


def rank_files(run, step):
    ckpt = run / "checkpoints" / f"step-{step}"
    return {p.name: p.read_bytes() for p in sorted(ckpt.glob("rank-*.safetensors"))}


def main():
    work = pathlib.Path(tempfile.mkdtemp(prefix="checkpoint-kill."))
    try:
        ref_log = work / "reference.log"
        with open(ref_log, "w") as log:
            proc = start(work / "reference", log)
            begin = wait_for(ref_log, r"step 4/8", proc)
            end = wait_for(ref_log, r"saved checkpoint \S+step-4 in", proc)
            proc.wait()
        if proc.returncode != 0 or begin is None or end is None:
            print(ref_log.read_text()[-2000:])
            sys.exit("the reference run failed")
        window = end - begin
        expected = rank_files(work / "reference" / "run", 8)
        print(f"the save of step 4: {window:.2f} s from its step's line to its commit; "
              f"{KILLS} kills drawn uniformly over it")
        rng = random.Random(int(os.environ.get("SEED", "1")))
        matched = 0
        for k in range(KILLS):
            out = work / f"kill-{k}"
            log_path = work / f"kill-{k}.log"
            delay = rng.uniform(0, window)
            with open(log_path, "w") as log:
                proc = start(out, log)
                armed = wait_for(log_path, r"step 4/8", proc)
                if armed is not None:
                    time.sleep(max(0.0, armed + delay - time.monotonic()))
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            latest = (out / "run" / "checkpoints" / "latest").read_text().strip()
            with open(log_path, "a") as log:
                resumed = subprocess.run(command(out), stdout=log, stderr=subprocess.STDOUT, env=ENV)
            text = log_path.read_text(errors="replace")
            found = re.findall(r"resumed\s+from \S+ \(step (\d+)\)", text)
            same = resumed.returncode == 0 and rank_files(out / "run", 8) == expected
            matched += same
            print(f"kill {k + 1:2d} at {delay:5.2f} s: latest was {latest}, resumed from step "
                  f"{found[-1] if found else '?'}: {'same bytes' if same else 'DIFFERENT'}")
            shutil.rmtree(out)
        print(f"{matched} of {KILLS} resumed runs ended on the reference's bytes (target: all)")
        sys.exit(0 if matched == KILLS else 1)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
