#!/bin/bash
# Installs (idempotently) everything q4m needs to build and test on Debian 12:
#  - MariaDB server/client pinned to the version whose source headers we build against, and held;
#  - q4m-monitor's Python packages and Debian's Chromium + ChromeDriver (its browser tests);
#  - the server source headers + Debian's generated headers and libmysqlservices.a, cached in
#    ~/.cache/q4m/<version> so later runs (and fresh clones) do not download them again.
# Prints the cache directory (MARIADB_SDK) on stdout as its last line.
set -euo pipefail
MARIADB_VERSION=10.11.18
DEB_VERSION="1:${MARIADB_VERSION}-0+deb12u1"
CACHE=${Q4M_CACHE:-$HOME/.cache/q4m}/mariadb-$MARIADB_VERSION
log() { echo "[setup] $*" >&2; }

SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
APT_UPDATED=0
apt_update_once() { [ $APT_UPDATED = 1 ] || { log "apt-get update"; $SUDO apt-get update -qq >&2; APT_UPDATED=1; }; }

have_pkg_version() { [ "$(dpkg-query -W -f='${Version}' "$1" 2>/dev/null || true)" = "$2" ]; }

# 1. server + client + toolchain, pinned and held
PKGS="mariadb-server mariadb-server-core mariadb-client mariadb-client-core mariadb-common libmariadb3 mariadb-backup"
need_install=0
for p in $PKGS; do have_pkg_version "$p" "$DEB_VERSION" || need_install=1; done
for p in g++ make libmariadb-dev python3-pytest python3-pymysql; do dpkg -s "$p" >/dev/null 2>&1 || need_install=1; done
if [ $need_install = 1 ]; then
  apt_update_once
  log "installing MariaDB $DEB_VERSION (pinned) and build tools"
  $SUDO apt-mark unhold $PKGS libmariadb-dev >/dev/null 2>&1 || true
  pinned=""; for p in $PKGS libmariadb-dev; do pinned="$pinned $p=$DEB_VERSION"; done
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends --allow-downgrades \
    --allow-change-held-packages g++ make python3-pytest python3-pymysql $pinned >&2
  $SUDO apt-mark hold $PKGS libmariadb-dev >/dev/null
  # Debian starts a system mariadbd on install; we never need it for build or tests.
  if command -v systemctl >/dev/null 2>&1; then $SUDO systemctl stop mariadb >/dev/null 2>&1 || true; fi
  $SUDO service mariadb stop >/dev/null 2>&1 || true
fi

# 2. q4m-monitor (tools/monitor) and its browser tests: Debian's packages, pinned. Chromium
# is the exception: Debian's security archive keeps only its newest build, so the pinned one
# may be gone; then the archive's current build is installed, browser and driver always at
# one version (ChromeDriver drives only its own Chromium).
MONITOR_PKGS="python3-prometheus-client=0.16.0-0.1 python3-flask=2.2.2-3 python3-waitress=2.1.2-2+deb12u1
  python3-selenium=4.8.3+dfsg-1"
CHROMIUM_VERSION=156.0.8078.108-1~deb12u1
need_monitor=0
for pv in $MONITOR_PKGS; do have_pkg_version "${pv%%=*}" "${pv#*=}" || need_monitor=1; done
chromium_have=$(dpkg-query -W -f='${Version}' chromium 2>/dev/null || true)
driver_have=$(dpkg-query -W -f='${Version}' chromium-driver 2>/dev/null || true)
[ -n "$chromium_have" ] && [ "$chromium_have" = "$driver_have" ] || need_monitor=1
if [ $need_monitor = 1 ]; then
  apt_update_once
  chromium_pin=$CHROMIUM_VERSION
  if ! apt-cache madison chromium | grep -qF " $CHROMIUM_VERSION "; then
    chromium_pin=$(apt-cache policy chromium | sed -n 's/^ *Candidate: //p')
    log "chromium $CHROMIUM_VERSION is no longer in the archive; installing its current build $chromium_pin"
  fi
  log "installing the monitor's packages (pinned) and chromium $chromium_pin"
  # shellcheck disable=SC2086  # one word per package
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends --allow-downgrades \
    $MONITOR_PKGS "chromium=$chromium_pin" "chromium-driver=$chromium_pin" >&2
fi

# 3. server source headers (cached, keyed by version)
if [ ! -f "$CACHE/.complete" ]; then
  mkdir -p "$CACHE/dl"
  if [ ! -f "$CACHE/dl/mariadb_${MARIADB_VERSION}.orig.tar.gz" ]; then
    if [ ! -f /etc/apt/sources.list.d/q4m-deb-src.sources ]; then
      log "adding a deb-src entry for Debian's main archive"
      sed -n '1,/^$/p' /etc/apt/sources.list.d/debian.sources | sed 's/^Types: deb$/Types: deb-src/' \
        | $SUDO tee /etc/apt/sources.list.d/q4m-deb-src.sources >/dev/null
      APT_UPDATED=0
    fi
    apt_update_once
    log "downloading MariaDB $MARIADB_VERSION source (~115 MB, cached in $CACHE)"
    (cd "$CACHE/dl" && apt-get source --download-only -qq "mariadb=$DEB_VERSION" >&2)
  fi
  log "extracting headers"
  rm -rf "$CACHE/src" "$CACHE/devroot" "$CACHE/gen"
  mkdir -p "$CACHE/src" "$CACHE/gen"
  tar xzf "$CACHE/dl/mariadb_${MARIADB_VERSION}.orig.tar.gz" -C "$CACHE/src" --strip-components=1 --wildcards \
    "mariadb-$MARIADB_VERSION/include/*" "mariadb-$MARIADB_VERSION/sql/*.h" \
    "mariadb-$MARIADB_VERSION/wsrep-lib/include/*" "mariadb-$MARIADB_VERSION/wsrep-lib/wsrep-API/v26/*"
  (cd "$CACHE/dl" && for p in libmariadbd-dev libmariadb-dev; do
     ls ${p}_*.deb >/dev/null 2>&1 || { apt_update_once; apt-get download -qq "$p=$DEB_VERSION" >&2; }
   done)
  for d in "$CACHE"/dl/libmariadb*-dev_*.deb; do dpkg-deb -x "$d" "$CACHE/devroot"; done
  cp "$CACHE/src/include/probes_mysql_nodtrace.h.in" "$CACHE/gen/probes_mysql_nodtrace.h"
  touch "$CACHE/.complete"
fi
echo "$CACHE"
