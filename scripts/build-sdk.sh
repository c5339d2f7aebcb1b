#!/bin/bash
# Makes (once) the private SDK the plugin is compiled against for one server version, in
# ${Q4M_CACHE:-~/.cache/q4m}/mariadb-<upstream version> (docs/build.md):
#   src/     the server's source headers, from Debian's source package of that version; when the
#            archive cannot serve it (Debian's security archive often lacks the source of its
#            newest build on mirrors), from the newest source package of the same 10.x series
#            it can serve, but only if tools/struct-probe/abi-check.py shows that those headers
#            describe the classes the plugin uses as that version's own compiled code does
#            (members, offsets, virtual methods: DWARF of its libmariadbd.a);
#   devroot/ generated headers (my_config.h, mysql_version.h, ...) and libmysqlservices.a from
#            that exact version's libmariadbd-dev and libmariadb-dev debs (unpacked, not installed).
#   scripts/build-sdk.sh 1:10.11.19-0+deb12u1 [--dry-run]
# Prints the SDK directory; exit status 1 (and why, on stderr) if no SDK can be made for the
# version. Needs apt's deb-src entries (scripts/setup-deps.sh adds them), g++, make and gdb.
set -euo pipefail
cd "$(dirname "$0")/.."
DEB_VERSION=$1
DRY_RUN=0; [ "${2:-}" = --dry-run ] && DRY_RUN=1
CACHE_ROOT=${Q4M_CACHE:-$HOME/.cache/q4m}
log() { echo "[sdk] $*" >&2; }
upstream() { local v=${1#*:}; echo "${v%%-*}"; }
VERSION=$(upstream "$DEB_VERSION")
SERIES=${VERSION%.*}
CACHE=$CACHE_ROOT/mariadb-$VERSION

if [ -f "$CACHE/.complete" ]; then echo "$CACHE"; exit 0; fi
# The source package versions apt knows, newest first.
SOURCE_VERSIONS=$(apt-cache showsrc mariadb 2>/dev/null | sed -n 's/^Version: //p' | sort -uVr)
# A version found unbuildable stays so until apt's source packages change (no re-check per run).
REFUSED=$CACHE/refused
if [ -f "$REFUSED" ] && [ "$(head -1 "$REFUSED")" = "$(echo $SOURCE_VERSIONS)" ]; then
  tail -n +2 "$REFUSED" >&2; exit 1
fi

# The source package: this version's if apt can fetch it, else the newest of the series it can.
fetch_source() {  # fetch_source DEB_VERSION DIR -> 0 if DIR has the orig tarball
  local v=$1 dir=$2 up
  up=$(upstream "$v")
  ls "$dir"/mariadb_"$up".orig.tar.* >/dev/null 2>&1 && return 0
  if [ $DRY_RUN = 1 ]; then
    if grep -qxF "$v" <<<"$SOURCE_VERSIONS"; then
      log "would download the source package mariadb=$v (~115 MB)"; return 0
    fi
    log "the source package mariadb=$v is not in apt's source lists"; return 1
  fi
  mkdir -p "$dir"
  log "downloading the source package mariadb=$v (~115 MB)"
  (cd "$dir" && apt-get source --download-only -qq "mariadb=$v" >&2) && return 0
  log "apt cannot fetch the source package mariadb=$v"
  return 1
}

# The libmariadbd-dev / libmariadb-dev debs of one version, unpacked into DIR/devroot.
unpack_dev_debs() {  # unpack_dev_debs DEB_VERSION SDK_DIR
  local v=$1 sdk=$2 p
  [ $DRY_RUN = 1 ] || mkdir -p "$sdk/dl"
  for p in libmariadbd-dev libmariadb-dev; do
    ls "$sdk"/dl/"${p}"_*.deb >/dev/null 2>&1 && continue
    if [ $DRY_RUN = 1 ]; then log "would download $p=$v"; continue; fi
    log "downloading $p=$v"
    (cd "$sdk/dl" && apt-get download -qq "$p=$v" >&2)
  done
  [ $DRY_RUN = 1 ] && return 0
  rm -rf "$sdk/devroot"; mkdir -p "$sdk/devroot"
  for p in "$sdk"/dl/libmariadb*-dev_*.deb; do dpkg-deb -x "$p" "$sdk/devroot"; done
}

extract_headers() {  # extract_headers TARBALL UPSTREAM SDK_DIR
  local tarball=$1 up=$2 sdk=$3
  rm -rf "$sdk/src" "$sdk/gen"; mkdir -p "$sdk/src" "$sdk/gen"
  tar xf "$tarball" -C "$sdk/src" --strip-components=1 --wildcards \
    "mariadb-$up/include/*" "mariadb-$up/sql/*.h" \
    "mariadb-$up/wsrep-lib/include/*" "mariadb-$up/wsrep-lib/wsrep-API/v26/*"
  cp "$sdk/src/include/probes_mysql_nodtrace.h.in" "$sdk/gen/probes_mysql_nodtrace.h"
}

# An SDK whose headers all come from one version (its own source package).
exact_sdk() {  # exact_sdk DEB_VERSION -> 0 if made (or already there)
  local v=$1 up sdk
  up=$(upstream "$v"); sdk=$CACHE_ROOT/mariadb-$up
  [ -f "$sdk/.complete" ] && return 0
  fetch_source "$v" "$sdk/dl" || return 1
  [ $DRY_RUN = 1 ] && { unpack_dev_debs "$v" "$sdk"; return 0; }
  log "extracting MariaDB $up's headers into $sdk"
  unpack_dev_debs "$v" "$sdk"
  extract_headers "$(ls "$sdk"/dl/mariadb_"$up".orig.tar.* | grep -v '\.asc$' | head -1)" "$up" "$sdk"
  printf 'server %s\nsource %s\n' "$v" "$v" > "$sdk/SDK-INFO"
  touch "$sdk/.complete"
}

if exact_sdk "$DEB_VERSION"; then
  [ $DRY_RUN = 1 ] && log "would make $CACHE from MariaDB $VERSION's own source package"
  echo "$CACHE"; exit 0
fi

# Fallback: the newest source of the series that is older than this version and fetchable.
for v in $SOURCE_VERSIONS; do
  up=$(upstream "$v")
  [ "${up%.*}" = "$SERIES" ] || continue
  dpkg --compare-versions "$v" lt "$DEB_VERSION" || continue
  if [ $DRY_RUN = 1 ]; then
    log "would make $CACHE from MariaDB $up's source headers and $VERSION's generated headers,"
    log "then compare them with the struct probe (tools/struct-probe/probe.sh $up $VERSION)"
    exact_sdk "$v" || true; unpack_dev_debs "$DEB_VERSION" "$CACHE"
    echo "$CACHE"; exit 0
  fi
  exact_sdk "$v" || continue
  log "building MariaDB $VERSION's SDK from MariaDB $up's source headers and $VERSION's own packaged headers"
  rm -rf "$CACHE/src" "$CACHE/gen" "$REFUSED"
  unpack_dev_debs "$DEB_VERSION" "$CACHE"
  cp -a "$CACHE_ROOT/mariadb-$up/src" "$CACHE/src"
  cp -a "$CACHE_ROOT/mariadb-$up/gen" "$CACHE/gen"
  printf 'server %s\nsource %s\n' "$DEB_VERSION" "$v" > "$CACHE/SDK-INFO"
  # The checks need the SDK marked; unmarked again if they fail. The struct probe compares
  # the two header sets (the generated headers' effect); abi-check compares the headers with
  # the server's own compiled code, which alone sees what changed in its source.
  touch "$CACHE/.complete"
  report=$CACHE/abi-check.txt
  if Q4M_CACHE=$CACHE_ROOT bash tools/struct-probe/probe.sh "$up" "$VERSION" >&2 \
     && python3 tools/struct-probe/abi-check.py "$CACHE" > "$report" 2>&1; then
    log "MariaDB $up's source headers describe $VERSION's classes as its own code does ($report)"
    echo "$CACHE"; exit 0
  fi
  rm -f "$CACHE/.complete"
  { echo $SOURCE_VERSIONS
    [ -f "$report" ] && grep -v ': same$' "$report" | head -40 | sed 's/^/[sdk]   /'
    echo "[sdk] MariaDB $up's headers do not describe $VERSION's classes (above; $report): the plugin"
    echo "[sdk] cannot be built for $VERSION until apt can fetch its source package (docs/build.md)"
  } > "$REFUSED"
  tail -n +2 "$REFUSED" >&2
  exit 1
done
log "no source package of MariaDB $SERIES up to $DEB_VERSION can be fetched (deb-src entries missing?)"
exit 1
