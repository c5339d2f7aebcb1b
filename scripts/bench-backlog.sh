#!/bin/bash
# Issue 43 (the row index's cold blocks): shallow-queue q4m-bench multireader/multirw and the deep
# backlog measurement (scripts/measure-backlog.py), an old build against this one, alternated
# round by round on one machine. OLD defaults to /work/main/build/plugin.
#   scripts/bench-backlog.sh [ROUNDS] [ROWS]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
ROWS=${2:-1000000}
OLD=${OLD:-/work/main/build/plugin}
NEW=${NEW:-$PWD/build/plugin}
for round in $(seq 1 "$ROUNDS"); do
  for build in old new; do
    dir=$OLD; [ $build = new ] && dir=$NEW
    echo "== round $round: $build ($dir)"
    Q4M_BENCH_PLUGIN_DIR=$dir scripts/bench.sh --engines queue --scenarios multireader,multirw --concurrency 16 \
      --messages 40000 --sync none 2>/dev/null | awk -v b="$build" '/^== /{s=$2} /^queue /{print b, s, "conc", $2, $3, "msg/s"}' || true
    [ "$ROWS" = 0 ] || /usr/bin/python3 scripts/measure-backlog.py --rows "$ROWS" --plugin-dir "$dir"
  done
done
