#!/usr/bin/env bash
# The timing figures the unit tests leave out. ctest runs its tests side by side on shared cores,
# so they assert only what a loaded machine keeps (an order, a count, a timeout that fires at all,
# each bound far from what a broken feature would take). Here, on a machine that runs nothing
# else, the tests tagged [bench-timing] measure how fast and how close, print each figure and
# check it: wall_clock_breakdown's parts against the step time, the launcher's reaction times, a
# flooded TCP store's CPU and recovery, and a failure's way across two simulated hosts (that one
# needs root and iproute2, and skips without them).
#
#   bench/timing.sh [BUILD_DIR]     # after `make build`
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
exec "$build/bin/genesis_tests" "[bench-timing]"
