#!/bin/sh
# A `genesis launch` worker that dies once: on the first attempt (GENESIS_RESTART_COUNT=0) rank 1
# runs the command, waits until RUN_DIR/checkpoints/latest exists and SIGKILLs it, as a crashed
# node would die; every other rank and every restarted attempt just runs the command. Used by
# test_resume_crash.cpp. Usage: kill_rank_once.sh RUN_DIR COMMAND [ARGS...]
run_dir=$1
shift
if [ "${GENESIS_RESTART_COUNT:-0}" != 0 ] || [ "${RANK:-0}" != 1 ]; then
  exec "$@"
fi
"$@" &
pid=$!
while [ ! -e "$run_dir/checkpoints/latest" ]; do
  # Finished (or failed) before any checkpoint: report that, the test will see no restart.
  if ! kill -0 "$pid" 2>/dev/null; then
    wait "$pid"
    exit $?
  fi
  sleep 0.01
done
echo "kill_rank_once.sh: killing rank 1 (pid $pid) after $(cat "$run_dir/checkpoints/latest")" >&2
kill -9 "$pid"
wait "$pid"
exit $?
