#!/bin/bash
# Builds the Debian package mariadb-plugin-q4m from an already built tree (`make deb` builds the
# plugin and the tools first, then calls this). No network, no debhelper: dpkg-deb only.
#   scripts/build-deb.sh OUT_DIR SERVER_VERSION [VERSION_SUFFIX [MAINTAINER]]
# SERVER_VERSION is the mariadb-server version the plugin was built for; the package depends on
# exactly it. VERSION_SUFFIX is appended to the package version (e.g. "+local2" for a newer
# build of the same tree). Prints the path of the .deb as its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${1:?usage: build-deb.sh OUT_DIR SERVER_VERSION [VERSION_SUFFIX]}
SERVER_VERSION=${2:-}
SUFFIX=${3:-}
MAINTAINER=${4:-q4m authors <q4m@users.noreply.github.com>}
PKG=mariadb-plugin-q4m
SRC=$ROOT/packaging/deb
BUILD=$ROOT/build

[ -n "$SERVER_VERSION" ] || {
  echo "build-deb: no mariadb-server version: install mariadb-server-core or pass MARIADB_DEB_VERSION=..." >&2
  exit 1
}
for f in plugin/ha_queue.so bin/q4m-bench bin/q4m-forward; do
  [ -f "$BUILD/$f" ] || { echo "build-deb: $BUILD/$f is missing (make plugin tools)" >&2; exit 1; }
done

# Upstream version: the plugin's 1.0, plus the commit count so that a later tree is a newer
# package; Debian revision 1, plus the caller's suffix.
commits=$(git rev-list --count HEAD 2>/dev/null || echo 0)
gitrev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
VERSION="1.0.0+git${commits}-1${SUFFIX}"
ARCH=$(dpkg --print-architecture)

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
STAGE=$OUT/stage
rm -rf "$STAGE"
mkdir -p "$STAGE/DEBIAN"
umask 022

# The plugin must link in the server it is for: every symbol it takes from the server (the
# unversioned undefined ones) must be exported by this machine's mariadbd. Catches a plugin
# linked from stale objects, which the server would refuse at startup ("undefined symbol").
if [ -x /usr/sbin/mariadbd ] && [ -z "${Q4M_DEB_SKIP_SYMBOL_CHECK:-}" ]; then
  missing=$(comm -23 <(nm -D --undefined-only "$BUILD/plugin/ha_queue.so" | awk '$1 == "U" && $2 !~ /@/ {print $2}' | LC_ALL=C sort -u) \
                     <(nm -D --defined-only /usr/sbin/mariadbd | awk '{print $3}' | sed 's/@.*//' | LC_ALL=C sort -u))
  if [ -n "$missing" ]; then
    echo "build-deb: $BUILD/plugin/ha_queue.so needs symbols /usr/sbin/mariadbd does not export" \
         "(stale objects? make -B plugin):" >&2
    echo "$missing" | head -n 5 | c++filt >&2
    exit 1
  fi
fi

# --- files
install -D -m 644 "$BUILD/plugin/ha_queue.so" "$STAGE/usr/lib/mysql/plugin/ha_queue.so"
install -D -m 755 "$BUILD/bin/q4m-bench" "$STAGE/usr/bin/q4m-bench"
install -D -m 755 "$BUILD/bin/q4m-forward" "$STAGE/usr/bin/q4m-forward"
# Debian ships no debug info in the main package (lintian: unstripped-binary-or-object).
strip --strip-unneeded --remove-section=.comment --remove-section=.note \
  "$STAGE/usr/lib/mysql/plugin/ha_queue.so" "$STAGE/usr/bin/q4m-bench" "$STAGE/usr/bin/q4m-forward"
sed '1s|^#!.*python3.*$|#!/usr/bin/python3|' tools/backup/q4m-backup >"$STAGE/usr/bin/q4m-backup"
chmod 755 "$STAGE/usr/bin/q4m-backup"

# q4m-monitor: a private Python package next to its launcher; /usr/bin has a link to it.
MON=$STAGE/usr/share/q4m/monitor
mkdir -p "$MON"
install -m 755 tools/monitor/q4m-monitor "$MON/q4m-monitor"
(cd tools/monitor && find q4m_monitor -name __pycache__ -prune -o -type f ! -name '*.pyc' -print) |
  while read -r f; do install -D -m 644 "tools/monitor/$f" "$MON/$f"; done
ln -s ../share/q4m/monitor/q4m-monitor "$STAGE/usr/bin/q4m-monitor"

install -D -m 644 "$SRC/50-q4m.cnf" "$STAGE/etc/mysql/mariadb.conf.d/50-q4m.cnf"
install -D -m 644 "$SRC/q4m-monitor.service" "$STAGE/lib/systemd/system/q4m-monitor.service"
install -D -m 644 "$SRC/q4m-forward@.service" "$STAGE/lib/systemd/system/q4m-forward@.service"
install -D -m 644 "$SRC/lintian-overrides" "$STAGE/usr/share/lintian/overrides/$PKG"

DOC=$STAGE/usr/share/doc/$PKG
install -D -m 644 "$SRC/copyright" "$DOC/copyright"
install -m 644 "$SRC/README" "$DOC/README"
date=$(date -R -d "@$(git log -1 --format=%ct 2>/dev/null || date +%s)")
sed -e "s/@VERSION@/$VERSION/" -e "s/@GITREV@/$gitrev/" -e "s/@SERVER_VERSION@/$SERVER_VERSION/" \
    -e "s/@DATE@/$date/" -e "s|@MAINTAINER@|$MAINTAINER|" "$SRC/changelog.in" | gzip -9n >"$DOC/changelog.Debian.gz"
chmod 644 "$DOC/changelog.Debian.gz"

# --- control
# Shared-library dependencies of the binaries, as dpkg-shlibdeps computes them (it wants a
# debian/control to read, so it runs in a scratch directory).
SHL=$OUT/shlibs
rm -rf "$SHL"; mkdir -p "$SHL/debian"
printf 'Source: q4m\n\nPackage: %s\nArchitecture: any\n' "$PKG" >"$SHL/debian/control"
BINS=("$STAGE/usr/bin/q4m-bench" "$STAGE/usr/bin/q4m-forward" "$STAGE/usr/lib/mysql/plugin/ha_queue.so")
if command -v dpkg-shlibdeps >/dev/null; then
  shlibs=$(cd "$SHL" && dpkg-shlibdeps -O "${BINS[@]/#/-e}" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
else
  # No dpkg-dev (scripts/setup-deps.sh does not need it): the packages owning the libraries
  # the binaries load, without minimum versions.
  shlibs=$(for lib in $(objdump -p "${BINS[@]}" | awk '$1 == "NEEDED" {print $2}' | sort -u); do
             path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64|x86_64/ {print $NF; exit}')
             [ -n "$path" ] || continue
             real=$(readlink -f "$path")  # dpkg knows a file by one of its /lib, /usr/lib names
             { dpkg -S "$path" "$real" "${real#/usr}" 2>/dev/null || true; } | head -n 1 | cut -d: -f1
           done | sort -u | paste -sd, | sed 's/,/, /g')
fi
rm -rf "$SHL"
[ -n "$shlibs" ] || { echo "build-deb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
size=$(du -k -s --exclude=DEBIAN "$STAGE" | cut -f1)
sed -e "s/@VERSION@/$VERSION/" -e "s/@ARCH@/$ARCH/" -e "s/@SIZE@/$size/" \
    -e "s/@SERVER_VERSION@/$SERVER_VERSION/g" -e "s/@SHLIBS@/$shlibs/" -e "s|@MAINTAINER@|$MAINTAINER|" \
    "$SRC/control.in" >"$STAGE/DEBIAN/control"
echo /etc/mysql/mariadb.conf.d/50-q4m.cnf >"$STAGE/DEBIAN/conffiles"
for s in postinst prerm postrm; do install -m 755 "$SRC/$s" "$STAGE/DEBIAN/$s"; done
(cd "$STAGE" && find . -path ./DEBIAN -prune -o -type f -print | sed 's|^\./||' | LC_ALL=C sort |
   xargs md5sum) >"$STAGE/DEBIAN/md5sums"
chmod 644 "$STAGE/DEBIAN/md5sums" "$STAGE/DEBIAN/control" "$STAGE/DEBIAN/conffiles"

deb=$OUT/${PKG}_${VERSION}_${ARCH}.deb
# One package in OUT_DIR, so that `apt install ./build/deb/mariadb-plugin-q4m_*.deb` picks it.
rm -f "$OUT/${PKG}"_*.deb
dpkg-deb --root-owner-group -Zxz --build "$STAGE" "$deb" >/dev/null
rm -rf "$STAGE"
echo "$deb"
