#!/bin/bash
# Server instructions per statement, counted with valgrind's callgrind: repeatable for the
# same build whatever else the machine is doing (throughput on a shared VM is not).
# Starts a throwaway mariadbd under callgrind with the QUEUE plugin, then for each statement
# kind runs N statements from one connection with instrumentation on, and prints the
# server's instructions per statement (and the top inclusive functions with --detail).
#   tools/profile/count-instructions.sh [--statements N] [--detail] [--queue-options TEXT]
# --queue-options: table options for the two QUEUE tables (e.g. "MAX_IN_FLIGHT=1000000"),
# to count what an option costs per statement.
# Kinds: select1 (SELECT 1), memory (1-row MEMORY table), poll (consume statement on an
# empty queue, timeout 0), consume (SELECT * FROM q WHERE queue_wait('q', 1) on a
# preloaded queue), insert (single-row INSERT). Sync mode none (no disk waits).
# Takes about a minute; needs `make plugin` first. Q4M_PROFILE_KEEP=1 keeps the temp dir.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
N=2000
DETAIL=0
QOPTS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --statements) N=$2; shift 2 ;;
    --detail) DETAIL=1; shift ;;
    --queue-options) QOPTS=$2; shift 2 ;;
    *) echo "usage: $0 [--statements N] [--detail] [--queue-options TEXT]" >&2; exit 2 ;;
  esac
done
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
[ -f build/plugin/ha_queue.so ] || { echo "missing build/plugin/ha_queue.so: run make plugin" >&2; exit 2; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/q4m-callgrind.XXXXXX")
SOCK=$TMP/sock
VG_PID=""
cleanup() {
  [ -n "$VG_PID" ] && { mariadb-admin --no-defaults -S "$SOCK" -uroot shutdown >/dev/null 2>&1 || kill "$VG_PID" 2>/dev/null || true; }
  for _ in $(seq 1 100); do [ -n "$VG_PID" ] && kill -0 "$VG_PID" 2>/dev/null || break; sleep 0.2; done
  [ "${Q4M_PROFILE_KEEP:-0}" = 1 ] && echo "kept $TMP" >&2 || rm -rf "$TMP"
}
trap cleanup EXIT

mariadb-install-db --no-defaults --datadir="$TMP/data" --auth-root-authentication-method=normal \
  --skip-test-db >"$TMP/install.log" 2>&1
USER_OPT=""; [ "$(id -u)" = 0 ] && USER_OPT="--user=root"
# Native AIO and a large buffer-pool reservation do not work under valgrind.
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$TMP/cg.out.%p" \
  /usr/sbin/mariadbd --no-defaults $USER_OPT --datadir="$TMP/data" --socket="$SOCK" --skip-networking \
  --plugin-dir="$REPO/build/plugin" --log-error="$TMP/error.log" --skip-log-bin \
  --innodb-buffer-pool-size=64M --innodb-buffer-pool-size-max=64M --innodb-use-native-aio=0 \
  >"$TMP/valgrind.log" 2>&1 &
VG_PID=$!
for _ in $(seq 1 600); do
  mariadb-admin --no-defaults -S "$SOCK" -uroot ping >/dev/null 2>&1 && break
  kill -0 "$VG_PID" 2>/dev/null || { cat "$TMP/error.log" >&2; exit 2; }
  sleep 0.2
done
M="mariadb --no-defaults -S $SOCK -uroot"
$M -e "INSTALL SONAME 'ha_queue'; SET GLOBAL queue_sync_mode = 'none'; CREATE DATABASE b;
  CREATE TABLE b.q (v BIGINT UNSIGNED NOT NULL) ENGINE=QUEUE $QOPTS;
  CREATE TABLE b.e (v BIGINT UNSIGNED NOT NULL) ENGINE=QUEUE $QOPTS;
  CREATE TABLE b.m (v BIGINT UNSIGNED NOT NULL) ENGINE=MEMORY; INSERT INTO b.m VALUES (1);"
python3 - "$TMP" "$N" <<'EOF'
import sys
tmp, n = sys.argv[1], int(sys.argv[2])
rows = n + 200  # the warm-up consumes too
open(f"{tmp}/preload.sql", "w").write("INSERT INTO q VALUES " + ",".join(f"({i})" for i in range(rows)) + ";\n")
kinds = {"select1": "SELECT 1;", "memory": "SELECT * FROM m;", "poll": "SELECT * FROM e WHERE queue_wait('e', 0);",
         "consume": "SELECT * FROM q WHERE queue_wait('q', 1);", "insert": "INSERT INTO e (v) VALUES (1);"}
for k, sql in kinds.items():
    open(f"{tmp}/{k}.sql", "w").write((sql + "\n") * n)
EOF
$M b <"$TMP/preload.sql"

echo "server instructions per statement (callgrind, $N statements, one connection, sync none):"
for kind in select1 memory poll consume insert; do
  head -n 50 "$TMP/$kind.sql" | $M b >/dev/null  # warm-up: caches, first-time allocations
  callgrind_control -z "$VG_PID" >/dev/null 2>&1
  callgrind_control -i on "$VG_PID" >/dev/null 2>&1
  $M b <"$TMP/$kind.sql" >/dev/null
  callgrind_control -i off "$VG_PID" >/dev/null 2>&1
  callgrind_control -d "$kind" "$VG_PID" >/dev/null 2>&1
  out=$(ls -t "$TMP"/cg.out.*.* | head -n 1)
  total=$(callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  printf "  %-8s %8d\n" "$kind" $((total / N))
  if [ $DETAIL = 1 ]; then
    callgrind_annotate --inclusive=yes "$out" 2>/dev/null | grep -E '^ *[0-9,]+ ' | head -n 25 |
      awk -v n="$N" '{gsub(",", "", $1); c=$1; $1=""; $2=""; printf "      %8d %s\n", c / n, substr($0, 1, 110)}' || true  # head closes the pipe early
  fi
done
