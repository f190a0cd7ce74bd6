#!/usr/bin/env bash
# make demo: the quick campaign (configs/quick.toml) on the default two-namespace topology, its
# analysis and its report; prints where the report is. Exit non-zero when a step failed (the
# later steps still run on what was recorded).
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
hostwire=("$top/.venv/bin/python" -m hostwire)
out=${HOSTWIRE_DEMO_OUT:-$top/runs/quick-$(date +%Y%m%d-%H%M%S)}
status=0
"${hostwire[@]}" run "$top/configs/quick.toml" --out "$out" || status=$?
[ "$status" -le 1 ] || exit "$status"   # usage error or interrupted: nothing to analyse
"${hostwire[@]}" analyze "$out" || exit $?
"${hostwire[@]}" report --digest "$out" || exit $?
printf 'hostwire: open %s/report.html\n' "$out"
exit "$status"
