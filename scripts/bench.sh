#!/bin/bash
# `make bench`: starts a throwaway MariaDB server (temp datadir, our plugin dir,
# the QUEUE engine loaded at startup, which gives it two-phase commit), runs
# build/bin/q4m-bench with defaults sized for a small machine (a few minutes on
# 2 cores), prints the machine, stops the server.
# Extra arguments go to q4m-bench and override the defaults, e.g.
#   scripts/bench.sh --concurrency 4,16 --sync none --messages 50000
#   scripts/bench.sh --engines innodb          # without the QUEUE engine
#   scripts/bench.sh --scenarios outbox,consume-txn --concurrency 16 --sync durable
# --binlog on|off|both: the server's binary log (log-bin, ROW format). Default: on, the
# configuration `./q4m.sh run` starts and the docs recommend (it coordinates two-phase
# commit and replication); off measures a server without it; both runs the whole benchmark
# once with each, on first. The output says which configuration ran.
# Env: Q4M_BENCH_KEEP=1 keeps the temp dir (server log) afterwards; Q4M_BENCH_PLUGIN_DIR runs
# another build's ha_queue.so (e.g. a copy of the old one, to alternate old and new).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
BENCH=$REPO/build/bin/q4m-bench
# Q4M_BENCH_SERVER_OPTS: more server options (e.g. --queue-binlog-redo=ON).
# Q4M_PLUGIN_DIR / Q4M_SERVER_ROOT: another build, a server unpacked elsewhere (docs/build.md,
# "Testing against another server version"), as the integration tests take them.
PLUGIN_DIR=${Q4M_BENCH_PLUGIN_DIR:-${Q4M_PLUGIN_DIR:-$REPO/build/plugin}}  # Q4M_BENCH_PLUGIN_DIR: another build (old/new alternated)
ROOT_OPTS=""
if [ -n "${Q4M_SERVER_ROOT:-}" ]; then
  PATH=$Q4M_SERVER_ROOT/usr/bin:$Q4M_SERVER_ROOT/usr/sbin:$PATH
  ROOT_OPTS="--basedir=$Q4M_SERVER_ROOT/usr --lc-messages-dir=$Q4M_SERVER_ROOT/usr/share/mysql"
fi
log() { echo "[bench] $*" >&2; }

[ -x "$BENCH" ] || { log "missing $BENCH (run: make tools)"; exit 2; }
# mariadbd lives in /usr/sbin, which is not on every user's PATH.
find_tool() { command -v "$1" 2>/dev/null || { [ -x "/usr/sbin/$1" ] && echo "/usr/sbin/$1"; } || true; }
MARIADBD=$(find_tool mariadbd)
INSTALL_DB=$(find_tool mariadb-install-db)
[ -n "$MARIADBD" ] && [ -n "$INSTALL_DB" ] || { log "mariadbd/mariadb-install-db not found: run make deps"; exit 2; }

# Does the run include the QUEUE engine (q4m-bench's --engines, default both), a
# binary log setting (--binlog)?
want_queue=1
binlog=""
prev=""
for a in "$@"; do
  engines=""
  case "$a" in
    --engines=*) engines=${a#--engines=} ;;
    --binlog=*) binlog=${a#--binlog=} ;;
    *) case "$prev" in
         --engines) engines=$a ;;
         --binlog) binlog=$a ;;
       esac ;;
  esac
  if [ -n "$engines" ]; then case ",$engines," in *,queue,*) want_queue=1 ;; *) want_queue=0 ;; esac; fi
  prev=$a
done
[ -n "$binlog" ] || binlog=on
if [ "$binlog" = both ]; then
  # The whole run twice, the recommended configuration first; q4m-bench takes on or off.
  args=() skip=0
  for a in "$@"; do
    if [ $skip = 1 ]; then skip=0; continue; fi
    case "$a" in
      --binlog) skip=1 ;;
      --binlog=*) ;;
      *) args+=("$a") ;;
    esac
  done
  status=0
  for b in on off; do
    echo "== binary log $b =="
    bash "$0" --binlog "$b" "${args[@]}" || status=$?
    echo
  done
  exit $status
fi
case "$binlog" in
  on) BINLOG_OPTS="--log-bin=mysql-bin --binlog-format=ROW --server-id=1" ;;
  off) BINLOG_OPTS="--skip-log-bin" ;;
  *) log "--binlog: expected on, off or both, got '$binlog'"; exit 2 ;;
esac
PLUGIN_OPTS=""; [ $want_queue = 1 ] && PLUGIN_OPTS="--plugin-load-add=ha_queue.so"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/q4m-bench.XXXXXX")
SOCK=$TMP/mysqld.sock
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    mariadb-admin --no-defaults --socket="$SOCK" -uroot shutdown >/dev/null 2>&1 || kill "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
  fi
  if [ "${Q4M_BENCH_KEEP:-0}" = 1 ]; then log "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT

log "initializing a throwaway server in $TMP"
"$INSTALL_DB" --no-defaults --datadir="$TMP/data" --auth-root-authentication-method=normal \
  --skip-test-db $ROOT_OPTS >"$TMP/install.log" 2>&1 || { cat "$TMP/install.log" >&2; exit 2; }

# InnoDB sized for a 2-core / small-memory machine; everything else default.
# innodb_flush_log_at_trx_commit, sync_binlog and queue_sync_mode are set per run by
# q4m-bench (--sync). QUEUE is loaded at startup: installed while the server runs with
# the binary log off, MariaDB would give it no two-phase commit (no transactions).
USER_OPT=""; [ "$(id -u)" = 0 ] && USER_OPT="--user=root"
log "binary log: $binlog${PLUGIN_OPTS:+; QUEUE loaded at startup}"
"$MARIADBD" --no-defaults $USER_OPT --datadir="$TMP/data" --socket="$SOCK" --skip-networking \
  --pid-file="$TMP/mysqld.pid" --log-error="$TMP/error.log" --plugin-dir="$PLUGIN_DIR" $PLUGIN_OPTS $ROOT_OPTS \
  --innodb-buffer-pool-size=256M --innodb-log-file-size=256M --innodb-flush-method=O_DIRECT \
  --max-connections=1100 --thread-cache-size=300 $BINLOG_OPTS ${Q4M_BENCH_SERVER_OPTS:-} &
SERVER_PID=$!
for _ in $(seq 1 300); do
  mariadb-admin --no-defaults --socket="$SOCK" -uroot ping >/dev/null 2>&1 && break
  kill -0 "$SERVER_PID" 2>/dev/null || { log "server failed to start:"; cat "$TMP/error.log" >&2; exit 2; }
  sleep 0.1
done
mariadb-admin --no-defaults --socket="$SOCK" -uroot ping >/dev/null 2>&1 || { log "server did not come up"; exit 2; }

if [ $want_queue = 1 ]; then
  support=$(mariadb --no-defaults --socket="$SOCK" -uroot -N -e \
    "SELECT SUPPORT FROM information_schema.ENGINES WHERE ENGINE='QUEUE'" 2>&1 || true)
  if [ "$support" != YES ]; then
    log "the QUEUE engine did not load at startup (plugin dir $PLUGIN_DIR): $support"
    grep -i "ha_queue\|queue" "$TMP/error.log" >&2 || true
    log "build it with 'make plugin', or run with --engines innodb"
    exit 2
  fi
fi

echo "== machine =="
uname -a
lscpu | grep -E '^(Model name|CPU\(s\)|Thread\(s\) per core|Core\(s\) per socket)' || true
echo "server: $(mariadb --no-defaults --socket="$SOCK" -uroot -N -e 'SELECT VERSION()')"
# What the server runs, not what was asked: the configuration the figures below are of.
server_binlog=$(mariadb --no-defaults --socket="$SOCK" -uroot -N -e "SELECT IF(@@log_bin, 'on', 'off')")
if [ "$server_binlog" = on ]; then
  echo "configuration: binary log on (ROW), as ./q4m.sh run and the docs recommend (--binlog off|both for the others)"
else
  echo "configuration: binary log off (not the recommended configuration; --binlog on|both for it)"
fi
echo

status=0
"$BENCH" --socket "$SOCK" --user root \
  --concurrency 1,4,16,64 --sync none,durable --messages 10000 --binlog "$binlog" \
  "$@" || status=$?
[ $status = 0 ] || log "q4m-bench exited with status $status (1 = a run failed verification or errored)"
exit $status
