#!/bin/bash
# A local mariadbd with the q4m engine, for trying it out (`make run` / `make stop`).
# Everything lives in ./var (datadir, socket, error log, pid); it persists across stop/start.
# The engine is loaded at startup (--plugin-load-add), which gives it two-phase commit, and the
# binary log is on: it coordinates two-phase commit across a crash (docs/transactions.md).
# Listens on its unix socket only; set Q4M_PORT to also listen on 127.0.0.1:$Q4M_PORT.
# Also runs q4m-monitor (tools/monitor: /metrics and the dashboard) on 127.0.0.1:$Q4M_MONITOR_PORT
# (default 9199), polling the server as root through the socket; Q4M_MONITOR=0 leaves it out.
# Character set utf8mb4 (collation utf8mb4_general_ci), as Debian's own server is configured
# (/etc/mysql/mariadb.conf.d/50-server.cnf); MariaDB's compiled-in default would be latin1.
# Q4M_VAR=DIR puts everything in DIR instead of ./var (the tests use a temporary one).
#   scripts/local-server.sh start|stop|status
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VAR=${Q4M_VAR:-$ROOT/var}
DATADIR=$VAR/data
SOCK=$VAR/mysqld.sock
ERRLOG=$VAR/mysqld.err
PIDFILE=$VAR/mysqld.pid
PLUGIN_DIR=$ROOT/build/plugin
MONITOR_PORT=${Q4M_MONITOR_PORT:-9199}
MONITOR_PIDFILE=$VAR/monitor.pid
MONITOR_LOG=$VAR/monitor.log

find_tool() { command -v "$1" 2>/dev/null || { [ -x "/usr/sbin/$1" ] && echo "/usr/sbin/$1"; } || true; }
MARIADBD=$(find_tool mariadbd)
INSTALL_DB=$(find_tool mariadb-install-db)
CLIENT=$(find_tool mariadb)
[ -n "$MARIADBD" ] && [ -n "$INSTALL_DB" ] && [ -n "$CLIENT" ] \
  || { echo "mariadbd/mariadb-install-db/mariadb not found: run scripts/setup-deps.sh" >&2; exit 1; }
AS_ROOT=(); [ "$(id -u)" = 0 ] && AS_ROOT=(--user=root)

sql() { "$CLIENT" --no-defaults -S "$SOCK" -uroot -N -B -e "$1"; }
running_pid() {
  local pid
  pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}
answers() { sql "SELECT 1" >/dev/null 2>&1; }

print_usage_hint() {
  cat <<EOF
q4m server running (pid $(running_pid)), data in $VAR
  connect:  mariadb -S $SOCK -uroot test
  try:      CREATE TABLE q (v TEXT) ENGINE=QUEUE; INSERT INTO q VALUES ('hi');
            SELECT * FROM q WHERE queue_wait('q', 0);
  log:      $ERRLOG
  stop:     ./q4m.sh stop  (or make stop)
EOF
  if monitor_pid >/dev/null; then
    cat <<EOF
q4m-monitor running (pid $(monitor_pid)), log $MONITOR_LOG
  dashboard: http://127.0.0.1:$MONITOR_PORT/  (log in as root, empty password)
  metrics:   http://127.0.0.1:$MONITOR_PORT/metrics
EOF
  fi
}

monitor_pid() {
  local pid
  pid=$(cat "$MONITOR_PIDFILE" 2>/dev/null) || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

# q4m-monitor next to the server (docs/monitoring.md), unless Q4M_MONITOR=0.
start_monitor() {
  [ "${Q4M_MONITOR:-1}" != 0 ] || return 0
  monitor_pid >/dev/null && return 0
  setsid /usr/bin/python3 "$ROOT/tools/monitor/q4m-monitor" --socket "$SOCK" --user root \
    --listen "127.0.0.1:$MONITOR_PORT" </dev/null >"$MONITOR_LOG" 2>&1 &
  echo $! >"$MONITOR_PIDFILE"
  local i
  for i in $(seq 100); do
    if ! monitor_pid >/dev/null; then
      echo "q4m-monitor did not start (the server runs on); last lines of $MONITOR_LOG:" >&2
      tail -10 "$MONITOR_LOG" >&2
      return 0
    fi
    grep -q "serving http" "$MONITOR_LOG" 2>/dev/null && return 0
    sleep 0.1
  done
}

stop_monitor() {
  local pid
  pid=$(monitor_pid) || return 0
  kill -TERM "$pid"
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  rm -f "$MONITOR_PIDFILE"
  echo "q4m-monitor stopped"
}

start() {
  if running_pid >/dev/null && answers; then
    echo "already running"
    start_monitor
    print_usage_hint
    return 0
  fi
  [ -f "$PLUGIN_DIR/ha_queue.so" ] || { echo "$PLUGIN_DIR/ha_queue.so is missing: run make plugin" >&2; exit 1; }
  mkdir -p "$VAR"
  if [ ! -d "$DATADIR/mysql" ]; then
    echo "creating $DATADIR (mariadb-install-db)"
    rm -rf "$DATADIR"
    "$INSTALL_DB" --no-defaults --datadir="$DATADIR" --auth-root-authentication-method=normal \
      --skip-test-db "${AS_ROOT[@]}" >"$VAR/install-db.log" 2>&1 \
      || { echo "mariadb-install-db failed, see $VAR/install-db.log" >&2; tail -20 "$VAR/install-db.log" >&2; exit 1; }
  fi
  local net=(--skip-networking)
  [ -n "${Q4M_PORT:-}" ] && net=(--bind-address=127.0.0.1 --port="$Q4M_PORT")
  local load=(--plugin-load-add=ha_queue.so)
  # Installed by an earlier version of this script: mysql.plugin loads it already.
  [ -f "$DATADIR/mysql/plugin.MAI" ] && grep -q ha_queue "$DATADIR/mysql/plugin.MAD" 2>/dev/null && load=()
  setsid "$MARIADBD" --no-defaults --datadir="$DATADIR" --socket="$SOCK" "${net[@]}" \
    --plugin-dir="$PLUGIN_DIR" "${load[@]}" --log-bin=mysql-bin --server-id=1 --sync-binlog=1 \
    --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
    --log-error="$ERRLOG" --pid-file="$PIDFILE" "${AS_ROOT[@]}" \
    </dev/null >/dev/null 2>&1 &
  local pid=$! i
  for i in $(seq 600); do
    answers && break
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "mariadbd exited during start; last lines of $ERRLOG:" >&2
      tail -30 "$ERRLOG" >&2
      exit 1
    fi
    sleep 0.1
  done
  answers || { echo "mariadbd did not answer within 60 s; see $ERRLOG" >&2; exit 1; }
  if [ -z "$(sql "SELECT 1 FROM information_schema.ENGINES WHERE ENGINE='QUEUE'")" ]; then
    sql "INSTALL SONAME 'ha_queue'" || { echo "INSTALL SONAME 'ha_queue' failed; see $ERRLOG" >&2; exit 1; }
  fi
  sql "CREATE DATABASE IF NOT EXISTS test"
  # ./var made by an earlier version of this script (a latin1 server) has a latin1 `test`:
  # new tables there would be latin1 still.
  if [ "$(sql "SELECT DEFAULT_CHARACTER_SET_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME='test'")" = latin1 ]; then
    sql "ALTER DATABASE test CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci"
    echo "database test: default character set latin1 -> utf8mb4 (tables made before keep theirs)"
  fi
  start_monitor
  print_usage_hint
}

stop() {
  local pid
  stop_monitor
  if ! pid=$(running_pid); then
    echo "not running"
    return 0
  fi
  kill -TERM "$pid"
  for _ in $(seq 600); do
    kill -0 "$pid" 2>/dev/null || { echo "stopped"; return 0; }
    sleep 0.1
  done
  echo "mariadbd (pid $pid) did not stop within 60 s" >&2
  exit 1
}

status() {
  if running_pid >/dev/null && answers; then
    print_usage_hint
  else
    echo "not running"
    return 3
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
