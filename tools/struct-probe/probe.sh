#!/bin/bash
# The struct probe (docs/build.md): compiles struct_probe.cc with the plugin's flags against
# one or two SDKs (or C++ standards) and compares what they print.
#   tools/struct-probe/probe.sh SDK_A [SDK_B]      SDK: a version (10.11.19) or an SDK directory
#   STD=gnu++11 tools/struct-probe/probe.sh SDK_A  the server's own standard against ours
# With two SDKs (or STD set), exit status 0 only if both print the same lines; the lines go to
# $OUT (default: a new directory in /tmp), one file per build.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$(mktemp -d /tmp/struct-probe.XXXXXX)}
mkdir -p "$OUT"
sdk_dir() { case "$1" in */*) echo "$1" ;; *) echo "${Q4M_CACHE:-$HOME/.cache/q4m}/mariadb-$1" ;; esac; }

probe() {  # probe SDK STD -> prints the output file
  local sdk std flags name
  sdk=$(sdk_dir "$1"); std=$2
  [ -f "$sdk/.complete" ] || { echo "no SDK in $sdk (scripts/setup-deps.sh makes it)" >&2; exit 2; }
  flags=$(make -s --no-print-directory plugin-cxxflags MARIADB_VERSION=probe SDK="$sdk")
  flags=${flags//-std=gnu++17/-std=$std}
  name=$(mktemp -u "$OUT/$(basename "$sdk")-$std.XXXX")
  # shellcheck disable=SC2086  # one word per flag
  g++ $flags -Wno-invalid-offsetof tools/struct-probe/struct_probe.cc -o "$name.bin"
  "$name.bin" > "$name.txt"
  echo "$name.txt"
}

a=$(probe "$1" gnu++17)
if [ $# -ge 2 ]; then b=$(probe "$2" gnu++17)
elif [ -n "${STD:-}" ]; then b=$(probe "$1" "$STD")
else cat "$a"; exit 0; fi
if diff "$a" "$b"; then
  echo "struct probe: $(wc -l < "$a") values, identical ($(basename "$a") = $(basename "$b"))"
else
  echo "struct probe: the layouts DIFFER ($(basename "$a") vs $(basename "$b"))" >&2; exit 1
fi
