#!/usr/bin/env bash
# make bench: runs every benchmark of the project in one go, so that the ratios against the
# peer tools compare like with like. Each perf/bench-*.sh and perf/bench_*.py prints its own table.
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
for script in perf/bench-*.sh perf/bench_*.py; do
    [ -e "$script" ] || continue
    echo "== $script"
    case "$script" in
        *.py) .venv/bin/python "$script" || status=1 ;;
        *) bash "$script" || status=1 ;;
    esac
done
exit $status
