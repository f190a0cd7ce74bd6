#!/usr/bin/env bash
# Probe effect of hw-schedtrace against trace-cmd record (paper table 2): microseconds per
# ping-pong round trip (hw-bench pingpong, two processes on one CPU, two switches per round trip)
#   bare | hw-schedtrace (scheduler set) | hw-schedtrace + I/O system calls | trace-cmd record
# with the same scheduler set. Prints the added cost per context switch and the ratio to
# trace-cmd's. The configurations alternate, REPS rounds of all four. Two estimates of the added
# cost per switch: from the minimum round trip of each configuration (other load on a shared
# machine only ever adds time, so the minimum is the least disturbed value; the ratio uses it),
# and the median over rounds of (round trip - the bare round trip of the same round) / 2.
#
# How trace-cmd record runs here: trace-cmd 3.1 writes /proc/sys/kernel/ftrace_enabled and the
# function-tracer files (set_ftrace_filter, set_ftrace_pid, ...) even when only events are
# recorded, and this kernel refuses those writes, so record stops with "Can't enable ftrace".
# It is run inside a private mount namespace (unshare -m) where a scratch file is bind-mounted
# over each refused file; nothing outside that namespace sees the mounts. It records into its own
# tracefs instance (-B hw-<pid>-tc, created here and removed on exit), never the top buffer.
# Both recorders run their per-CPU readers at SCHED_FIFO priority 1 (hw-schedtrace's default,
# trace-cmd's -r 1) and with the trace clock mono.
#
# Environment: LOOPS (default 200000), REPS (default 9), CPU (ping-pong CPU, default 0),
# TRACER_CPU (collectors, default 1), HOSTWIRE_BUILD (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${HOSTWIRE_BUILD:-build}
LOOPS=${LOOPS:-200000}
REPS=${REPS:-9}
CPU=${CPU:-0}
TRACER_CPU=${TRACER_CPU:-1}
T=/sys/kernel/tracing
BENCH=$BUILD/bin/hw-bench
ST=$BUILD/bin/hw-schedtrace
for tool in "$BENCH" "$ST"; do
    [ -x "$tool" ] || { echo "bench-schedtrace: $tool is not built (make build)" >&2; exit 1; }
done
command -v trace-cmd >/dev/null || { echo "bench-schedtrace: trace-cmd is missing (make setup)" >&2; exit 1; }
[ -d $T/instances ] || { echo "bench-schedtrace: tracefs is not mounted at $T" >&2; exit 1; }

SCHED_EVENTS=(sched:sched_switch sched:sched_wakeup sched:sched_wakeup_new sched:sched_migrate_task
    sched:sched_process_fork sched:sched_process_exec sched:sched_process_exit net:net_dev_queue
    net:net_dev_xmit net:netif_receive_skb sock:inet_sock_set_state)
[ -d $T/events/tcp/tcp_probe ] && SCHED_EVENTS+=(tcp:tcp_probe)
TC_INSTANCE=hw-$$-tc
WORK=$(mktemp -d)
cleanup() {
    rmdir "$T/instances/$TC_INSTANCE" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

pingpong=("$BENCH" pingpong --loops "$LOOPS" --cpu "$CPU")
round_trip() {  # stdout of a run -> its round_trip_us
    sed -n 's/.*round_trip_us=\([0-9.]*\).*/\1/p' | tail -1
}

run_bare() { "${pingpong[@]}" | round_trip; }

run_schedtrace() {
    rm -rf "$WORK/st"
    taskset -c "$TRACER_CPU" "$ST" -o "$WORK/st" "$@" -- "${pingpong[@]}" 2>"$WORK/st.err" | round_trip
}

run_tracecmd() {
    local ev=() e
    for e in "${SCHED_EVENTS[@]}"; do ev+=(-e "$e"); done
    mkdir -p "$T/instances/$TC_INSTANCE"
    local dummy=$WORK/ftrace-dummy
    echo 1 >"$dummy"
    local files=(/proc/sys/kernel/ftrace_enabled)
    local f
    for f in set_ftrace_filter set_ftrace_notrace set_ftrace_pid set_ftrace_notrace_pid; do
        files+=("$T/$f" "$T/instances/$TC_INSTANCE/$f")
    done
    # shellcheck disable=SC2016
    taskset -c "$TRACER_CPU" unshare -m sh -c '
        dummy=$1; shift; n=$1; shift
        i=0; while [ $i -lt "$n" ]; do [ -e "$1" ] && mount --bind "$dummy" "$1"; shift; i=$((i+1)); done
        exec "$@"' sh "$dummy" "${#files[@]}" "${files[@]}" \
        trace-cmd record -q -B "$TC_INSTANCE" -C mono -r 1 "${ev[@]}" -o "$WORK/tc.dat" -- "${pingpong[@]}" \
        2>"$WORK/tc.err" | round_trip
    rmdir "$T/instances/$TC_INSTANCE" 2>/dev/null || true
}

declare -A samples=()
configs=(bare schedtrace schedtrace_syscalls tracecmd)
for ((r = 1; r <= REPS; r++)); do
    for c in "${configs[@]}"; do
        case $c in
            bare) v=$(run_bare) ;;
            schedtrace) v=$(run_schedtrace) ;;
            schedtrace_syscalls) v=$(run_schedtrace -s) ;;
            tracecmd) v=$(run_tracecmd) ;;
        esac
        if [ -z "$v" ]; then
            echo "bench-schedtrace: the $c run gave no round trip time" >&2
            cat "$WORK"/*.err >&2 2>/dev/null || true
            exit 1
        fi
        samples[$c]+="$v "
    done
done
if grep -q "lost: overrun [1-9]" "$WORK/st.err"; then
    echo "bench-schedtrace: note: hw-schedtrace lost events in the last run: $(grep lost "$WORK/st.err")" >&2
fi

median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
declare -A med=() added=() low=()
for c in "${configs[@]}"; do
    med[$c]=$(echo "${samples[$c]}" | median)
    low[$c]=$(echo "${samples[$c]}" | tr ' ' '\n' | grep . | sort -g | head -1)
    added[$c]=$(paste -d' ' <(echo "${samples[$c]}" | tr ' ' '\n' | grep .) \
                           <(echo "${samples[bare]}" | tr ' ' '\n' | grep .) |
                awk '{printf "%s ", ($1 - $2) / 2}' | median)
done

echo "probe effect, hw-bench pingpong --loops $LOOPS on CPU $CPU, collectors on CPU $TRACER_CPU, $REPS rounds"
echo "events: ${SCHED_EVENTS[*]}"
printf '%-20s %10s %10s %14s %14s   %s\n' configuration min_rt_us median_rt_us added_us/sw_min added_us/sw_med round_trips_us
for c in "${configs[@]}"; do
    awk -v c="$c" -v lo="${low[$c]}" -v md="${med[$c]}" -v b="${low[bare]}" -v a="${added[$c]}" -v s="${samples[$c]}" \
        'BEGIN { printf "%-20s %10.3f %10.3f %14.3f %14.3f   %s\n", c, lo, md, (lo - b) / 2, a, s }'
done
awk -v hw="${low[schedtrace]}" -v tc="${low[tracecmd]}" -v b="${low[bare]}" -v ma="${added[schedtrace]}" -v mb="${added[tracecmd]}" 'BEGIN {
    a = (hw - b) / 2; t = (tc - b) / 2
    if (t <= 0) { print "ratio hw-schedtrace / trace-cmd added cost: undefined (trace-cmd added nothing measurable)"; exit }
    printf "ratio hw-schedtrace / trace-cmd added cost per switch (same events): %.2f from minima", a / t
    if (mb > 0) printf ", %.2f from paired medians", ma / mb
    printf " (target <= 1.10)\n" }'
