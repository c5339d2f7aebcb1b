#!/bin/bash
# Where the CPU goes in one benchmark scenario (docs/benchmarks.md, "Where the CPU goes with the
# binary log on"): runs scripts/bench.sh for one scenario on QUEUE, records the whole machine with
# `perf record -a -g` for SECONDS in the middle of the run, and prints µs of CPU per message by
# class (scripts/profile-classes.py). Needs perf (linux-perf) and root.
#   scripts/profile-bench.sh multireader on [messages] [seconds] [delay]
# Env: PROFILE_OUT (default /tmp/q4m-profile) keeps perf.data and the bench's output there.
set -euo pipefail
cd "$(dirname "$0")/.."
SCENARIO=${1:?scenario}; BINLOG=${2:-on}; MESSAGES=${3:-200000}; SECONDS_=${4:-8}; DELAY=${5:-6}
OUT=${PROFILE_OUT:-/tmp/q4m-profile}
mkdir -p "$OUT"
command -v perf >/dev/null || { echo "perf not found (apt install linux-perf)" >&2; exit 2; }
scripts/bench.sh --binlog "$BINLOG" --engines queue --scenarios "$SCENARIO" --sync durable \
  --concurrency 16 --messages "$MESSAGES" >"$OUT/bench.out" 2>&1 &
bench=$!
sleep "$DELAY"  # past the server's start and the scenario's prefill
perf record -F 999 -a -g -o "$OUT/perf.data" -- sleep "$SECONDS_" >/dev/null 2>&1
wait "$bench"
rate=$(awk '$1 == "queue" {print $3; exit}' "$OUT/bench.out")
[ -n "$rate" ] || { echo "no queue figure in $OUT/bench.out" >&2; exit 1; }
echo "$SCENARIO, binlog $BINLOG: $rate msg/s (perf running; ~10 % below a plain run)"
perf script -i "$OUT/perf.data" -F comm,ip,sym 2>/dev/null >"$OUT/stacks.txt"
python3 scripts/profile-classes.py "$OUT/stacks.txt" "$rate" "$SECONDS_"
