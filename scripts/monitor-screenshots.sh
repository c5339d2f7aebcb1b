#!/bin/bash
# Retakes the dashboard screenshots in docs/images (docs/monitoring.md) with headless Chromium:
# runs the dashboard's browser test, which saves them when Q4M_MONITOR_SCREENSHOTS is set.
set -euo pipefail
cd "$(dirname "$0")/.."
Q4M_MONITOR_SCREENSHOTS=$PWD/docs/images /usr/bin/python3 -m pytest -q tests/integration/test_monitor_dashboard.py "$@"
for f in docs/images/*.png; do
  case "$(basename "$f")" in
    overview.png|queue.png|dead-letters.png|read-only.png) mv "$f" "docs/images/monitor-$(basename "$f")" ;;
  esac
done
ls -l docs/images/monitor-*.png
