#!/bin/bash
# Entry point for a fresh Debian 12 machine: installs what q4m needs (idempotent, see
# scripts/setup-deps.sh), then runs the make target.
#   ./q4m.sh run    build + start a local server in ./var with the engine loaded, and q4m-monitor
#                   (metrics + dashboard on http://127.0.0.1:9199/, docs/monitoring.md)
#   ./q4m.sh test   build + run every test (unit, then integration on throwaway servers)
#   ./q4m.sh bench  build + run the benchmark (QUEUE vs InnoDB SKIP LOCKED vs SELECT 1)
#   ./q4m.sh stop   stop the local server and q4m-monitor
#   ./q4m.sh deb    build the Debian package build/deb/mariadb-plugin-q4m_*.deb (docs/build.md)
set -euo pipefail
cd "$(dirname "$0")"
case "${1:-}" in
  run|test|bench|stop|deb) ;;
  *) echo "usage: $0 run|test|bench|stop|deb" >&2; exit 1 ;;
esac
bash scripts/setup-deps.sh >/dev/null
exec make --no-print-directory "$@"
