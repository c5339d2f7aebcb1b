#!/bin/bash
# Prints the upstream MariaDB version (e.g. 10.11.19) q4m builds for: the installed server's
# (mariadb-server-core), else the version apt would install now (Debian's newest candidate,
# security archive included). With --debian, the whole Debian version (1:10.11.19-0+deb12u1).
# Prints nothing if neither is known.
set -euo pipefail
v=$(dpkg-query -W -f='${db:Status-Status} ${Version}' mariadb-server-core 2>/dev/null | sed -n 's/^installed //p' || true)
[ -n "$v" ] || v=$(apt-cache policy mariadb-server-core 2>/dev/null | sed -n 's/^ *Candidate: //p' | grep -v '(none)' || true)
[ -n "$v" ] || exit 0
if [ "${1:-}" = --debian ]; then echo "$v"; else v=${v#*:}; echo "${v%%-*}"; fi
