#!/bin/bash
# What the limits cost (issue 30): q4m-bench multireader and multirw on a plain QUEUE table and
# on tables with limits set high enough never to hold a row back, alternated round by round
# (scripts/bench.sh: a throwaway server per run), so that the machine's drift hits every
# variant alike. Prints each run's figures; docs/limits.md has the medians.
#   scripts/bench-limits.sh [ROUNDS] [extra q4m-bench arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
shift || true
declare -A VARIANTS=(
  [plain]=""
  [table-limits]="MAX_IN_FLIGHT=1000000000 MAX_RATE='1000000000'"
  [group-limits]="MESSAGE_GROUP_COLUMN='v' GROUP_CONCURRENCY=1000000 GROUP_RATE='1000000000' MAX_IN_FLIGHT=1000000000 MAX_RATE='1000000000'"
)
ORDER=(plain table-limits group-limits)
for round in $(seq 1 "$ROUNDS"); do
  for v in "${ORDER[@]}"; do
    echo "== round $round: $v (${VARIANTS[$v]:-no options})"
    scripts/bench.sh --engines queue --scenarios multireader,multirw --concurrency 16 --messages 40000 \
      --sync none --queue-options "${VARIANTS[$v]}" "$@" 2>/dev/null | awk -v v="$v" '/^== /{s=$2} /^queue /{print v, s, "conc", $2, $3, "msg/s"}' || true
  done
done
