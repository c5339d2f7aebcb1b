#!/bin/bash
# Installs (idempotently) everything q4m needs to build and test on Debian 12:
#  - MariaDB server/client at the newest version Debian serves (its security archive included),
#    held so that `apt upgrade` does not move the server under a plugin built for the old one:
#    a run of this script takes the new version, then `make` rebuilds the plugin for it
#    (README "Upgrading the server"); Q4M_MARIADB_DEB_VERSION=1:10.11.18-0+deb12u1 pins one;
#  - q4m-monitor's Python packages and Debian's Chromium + ChromeDriver (its browser tests);
#  - the server's headers for that version (scripts/build-sdk.sh), cached in
#    ~/.cache/q4m/mariadb-<version> so later runs (and fresh clones) do not download them again.
# --dry-run: says what it would install, download and build, changes nothing.
# Prints the cache directory (MARIADB_SDK) on stdout as its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
DRY_RUN=0; [ "${1:-}" = --dry-run ] && DRY_RUN=1
log() { echo "[setup] $*" >&2; }

SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
APT_UPDATED=0
apt_update_once() {
  [ $APT_UPDATED = 1 ] && return 0
  APT_UPDATED=1
  if [ $DRY_RUN = 1 ]; then log "would run apt-get update"; return 0; fi
  log "apt-get update"; $SUDO apt-get update -qq >&2
}
# The newest version must be known: lists older than a day are refreshed first.
if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*_InRelease' -mmin -1440 2>/dev/null | head -1)" ]; then
  apt_update_once
fi
# Source packages too (build-sdk.sh): a deb-src twin of each of Debian's entries, security included.
if ! grep -qs "debian-security" /etc/apt/sources.list.d/q4m-deb-src.sources; then
  if [ $DRY_RUN = 1 ]; then log "would add deb-src entries for Debian's archives (security included)"
  else
    log "adding deb-src entries for Debian's archives (security included)"
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
      | $SUDO tee /etc/apt/sources.list.d/q4m-deb-src.sources >/dev/null
    APT_UPDATED=0; apt_update_once
  fi
fi

have_pkg_version() { [ "$(dpkg-query -W -f='${Version}' "$1" 2>/dev/null || true)" = "$2" ]; }
sdk_args() { [ $DRY_RUN = 1 ] && echo --dry-run; true; }

# 1. the toolchain (build-sdk.sh compiles its checks with it)
TOOLS="g++ make gdb python3-pytest python3-pymysql"
need_tools=0
for p in $TOOLS; do dpkg -s "$p" >/dev/null 2>&1 || need_tools=1; done
if [ $need_tools = 1 ]; then
  if [ $DRY_RUN = 1 ]; then log "would install $TOOLS"; else
    apt_update_once
    log "installing $TOOLS"
    # shellcheck disable=SC2086  # one word per package
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $TOOLS >&2
  fi
fi

# 2. the server version: the newest Debian serves (or Q4M_MARIADB_DEB_VERSION), if the plugin
# can be built for it (its SDK, scripts/build-sdk.sh); else the installed one, else the newest
# version that can be. Chosen before installing: never a server the plugin cannot be built for.
PKGS="mariadb-server mariadb-server-core mariadb-client mariadb-client-core mariadb-common libmariadb3 mariadb-backup"
installed=$(dpkg-query -W -f='${db:Status-Status} ${Version}' mariadb-server-core 2>/dev/null | sed -n 's/^installed //p' || true)
candidate=$(apt-cache policy mariadb-server-core | sed -n 's/^ *Candidate: //p')
DEB_VERSION=${Q4M_MARIADB_DEB_VERSION:-$candidate}
[ -n "$DEB_VERSION" ] && [ "$DEB_VERSION" != "(none)" ] || { log "apt knows no mariadb-server-core"; exit 1; }
if ! CACHE=$(bash scripts/build-sdk.sh "$DEB_VERSION" $(sdk_args)); then
  wanted=$DEB_VERSION; DEB_VERSION=""
  for v in $installed $(apt-cache madison mariadb-server-core | awk '{print $3}'); do
    [ "$v" = "$wanted" ] && continue
    if CACHE=$(bash scripts/build-sdk.sh "$v" $(sdk_args)); then DEB_VERSION=$v; break; fi
  done
  [ -n "$DEB_VERSION" ] || { log "the plugin can be built for no MariaDB version apt offers"; exit 1; }
  log "WARNING: MariaDB $wanted cannot be built for yet (above); using $DEB_VERSION."
  log "WARNING: run this again when Debian's archive serves $wanted's source package (docs/build.md)."
fi

# 3. server + client at that version, held (so `apt upgrade` does not move the server under a
# plugin built for it: a run of this script does, and the next `make` rebuilds the plugin)
need_install=0
for p in $PKGS libmariadb-dev; do have_pkg_version "$p" "$DEB_VERSION" || need_install=1; done
pinned=""; for p in $PKGS libmariadb-dev; do pinned="$pinned $p=$DEB_VERSION"; done
if [ $need_install = 1 ]; then
  log "installing MariaDB $DEB_VERSION${installed:+ (installed: $installed)}"
  if [ $DRY_RUN = 1 ]; then
    log "would run: apt-get install$pinned; apt-mark hold"
    # shellcheck disable=SC2086  # one word per package
    apt-get -s install -qq --no-install-recommends --allow-downgrades --allow-change-held-packages $pinned 2>&1 \
      | grep -E '^(Inst|Remv)' | sed 's/^/[setup]   /' >&2 || true
  else
    apt_update_once
    # shellcheck disable=SC2086  # one word per package
    $SUDO apt-mark unhold $PKGS libmariadb-dev >/dev/null 2>&1 || true
    # shellcheck disable=SC2086
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends --allow-downgrades \
      --allow-change-held-packages $pinned >&2
    # shellcheck disable=SC2086
    $SUDO apt-mark hold $PKGS libmariadb-dev >/dev/null
    # Debian starts a system mariadbd on install; we never need it for build or tests.
    if command -v systemctl >/dev/null 2>&1; then $SUDO systemctl stop mariadb >/dev/null 2>&1 || true; fi
    $SUDO service mariadb stop >/dev/null 2>&1 || true
  fi
fi

# 4. q4m-monitor (tools/monitor) and its browser tests: Debian's packages, pinned. Chromium
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
  if [ $DRY_RUN = 1 ]; then log "(dry run: not installed)"; else
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends --allow-downgrades \
      $MONITOR_PKGS "chromium=$chromium_pin" "chromium-driver=$chromium_pin" >&2
  fi
fi

echo "$CACHE"
