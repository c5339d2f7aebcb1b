#!/bin/bash
# Runs every test: the unit test binaries (build/tests/*_test), then the integration tests
# (pytest, each test starting its own throwaway mariadbd). `make test` builds first, then calls this.
#   scripts/run-tests.sh [--unit-only] [pytest args...]
# Last line printed: "N passed, N failed" (unit + integration). Exit status 0 only if nothing failed.
set -uo pipefail
cd "$(dirname "$0")/.."

unit_only=0
if [ "${1:-}" = "--unit-only" ]; then unit_only=1; shift; fi

passed=0
failed=0
status=0
results=build/test-results
mkdir -p "$results"

# --- unit tests: each binary prints "N passed, N failed" as its last summary line
for src in tests/unit/*_test.cc; do
  [ -e "$src" ] || continue
  name=$(basename "$src" .cc)
  bin=build/tests/$name
  echo "== $name"
  if [ ! -x "$bin" ]; then
    echo "   $bin is missing (run make unit-tests)"
    failed=$((failed + 1)); status=1; continue
  fi
  out=$(timeout --kill-after=10 900 "$bin" 2>&1); rc=$?
  echo "$out" | tail -n 20
  summary=$(echo "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
  if [ -z "$summary" ]; then
    echo "   $name: no summary line (exit status $rc)"
    failed=$((failed + 1)); status=1; continue
  fi
  read -r p _ f _ <<<"$summary"
  passed=$((passed + p)); failed=$((failed + f))
  if [ "$rc" != 0 ] || [ "$f" != 0 ]; then
    status=1
    [ "$f" = 0 ] && failed=$((failed + 1))  # crashed or failed without counting it
  fi
done

# --- integration tests
if [ $unit_only = 0 ]; then
  # Debian's interpreter has python3-pytest and python3-pymysql (scripts/setup-deps.sh).
  PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
  xml=$results/integration.xml
  rm -f "$xml"
  echo "== integration tests (pytest)"
  # The overall bound guards against a hang; single statements already time out in the tests.
  timeout --kill-after=30 2400 "$PY" -m pytest -q tests/integration --junitxml="$xml" "$@"
  rc=$?
  [ "$rc" = 0 ] || status=1
  counts=$("$PY" - "$xml" <<'EOF'
import sys, xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except Exception:
    print("0 1"); sys.exit()
suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
t = sum(int(s.get("tests", 0)) for s in suites)
bad = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
skipped = sum(int(s.get("skipped", 0)) for s in suites)
print(t - bad - skipped, bad)
EOF
)
  read -r p f <<<"$counts"
  if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; fi  # pytest itself failed (e.g. timeout)
  passed=$((passed + p)); failed=$((failed + f))
fi

echo "$passed passed, $failed failed"
exit $status
