#!/usr/bin/env python3
"""The timeline on a real run: 20 senders and 20 background processes for 60 s with every
collector (capture, kernel trace, system calls through tracefs) on the default 10 Mbit/s link
(--link-rate), recorded here (or --run DIR). Times, from a cold start (no cached table): loading the run, building the
joined tables (switches, wake-ups, running, run queue, calls, streams, segments, backlog) and
explaining every gap of every stream (target: at most 3 s together); then exporting the whole
window as a Perfetto trace (target: 10^6 events a second). Prints the event counts beside
the times. Last, `hostwire gaps` with the kernel trace whole and in slabs: time, peak memory, and
whether both give the same table.
Usage: perf/bench_timeline_run.py [--run DIR] [--keep DIR] [--duration S] [--link-rate RATE]"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analyze"))

import hostwire  # noqa: E402
from hostwire.record.point import RunPoint  # noqa: E402
from hostwire.record.runner import record_run  # noqa: E402
from hostwire.procmem import Sampler  # noqa: E402
from hostwire.timeline import cache, gap_sources, gaps, perfetto_trace  # noqa: E402
from hostwire.timeline.build import Timeline  # noqa: E402
from hostwire.window import Window  # noqa: E402


def record(root: Path, duration_s: float, link_rate: str) -> Path:
    point = RunPoint(senders=20, background=20, warmup_s=2.0, duration_s=duration_s, quiet_s=1.0,
                     link_rate=link_rate, syscalls="tracefs", kernel_trace=True)
    rec = record_run(root, "timeline-bench", point)
    if rec.status != "complete":
        raise SystemExit(f"bench_timeline_run: the run did not complete: {rec.reason}")
    return root / "timeline-bench"


def drop_cache(run_dir: Path) -> None:
    for name in cache.CACHED:
        cache.path_of(run_dir, name).unlink(missing_ok=True)


def gaps_memory(run_dir: Path) -> None:
    """`hostwire gaps` with the kernel trace whole and in slabs, each in its own process: wall
    seconds, peak anonymous memory of the process (hostwire.procmem), and whether both print the
    same table."""
    trace_mb = (run_dir / "raw" / "sched.tsv").stat().st_size / 1e6
    print(f"{'hostwire gaps':<32}{'trace MB':>12}{'seconds':>10}{'peak MiB':>14}")
    outputs = {}
    for engine in ("memory", "slabs"):
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "hostwire", "gaps", str(run_dir), "--engine", engine],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        with Sampler([proc.pid]) as sampler:
            outputs[engine] = proc.communicate()[0]
        print(f"{'--engine ' + engine:<32}{trace_mb:>12.0f}{time.perf_counter() - t0:>10.2f}{sampler.peak / 2**20:>14.0f}"
              + ("" if proc.returncode == 0 else f"  (exit {proc.returncode})"))
    print(f"gaps: slabs print the same table as memory: {'yes' if outputs['slabs'] == outputs['memory'] else 'NO'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, help="a recorded run to use instead of recording one")
    parser.add_argument("--keep", type=Path, help="record into this directory and keep the run")
    parser.add_argument("--duration", type=float, default=60.0, help="logging window of the recorded run, s")
    parser.add_argument("--link-rate", default="10mbit", help="link of the recorded run (default 10mbit)")
    args = parser.parse_args()
    scratch = None
    if args.run is not None:
        run_dir = args.run
    else:
        root = args.keep or Path(tempfile.mkdtemp(prefix="hostwire-timeline-bench-"))
        scratch = None if args.keep else root
        root.mkdir(parents=True, exist_ok=True)
        print(f"-- recording 20 senders, 20 background processes, {args.duration:.0f} s, every collector, "
              f"{args.link_rate}")
        run_dir = record(root, args.duration, args.link_rate)
    try:
        drop_cache(run_dir)
        rows: list[tuple[str, int, float]] = []
        t0 = time.perf_counter()
        run = hostwire.load_run(run_dir)
        frames = run.df_frames()
        sched = run.df_sched()
        calls_raw = run.df_syscalls()
        t1 = time.perf_counter()
        rows.append(("load (frames, sched, calls)", len(frames) + len(sched) + len(calls_raw), t1 - t0))
        timeline = Timeline.of(run)
        joined = {name: getattr(timeline, f"df_{name}")() for name in
                  ("switches", "wakeups", "running", "runqueue", "calls", "streams", "segments", "backlog")}
        t2 = time.perf_counter()
        rows.append(("join (8 tables)", sum(len(t) for t in joined.values()), t2 - t1))
        start, end = run.window_ns()
        table, _ = gaps.explain(gap_sources.gap_inputs(run), None, Window(start, end))
        t3 = time.perf_counter()
        rows.append((f"gaps ({len(table)} gaps)", int(len(Timeline.of(run).data_frames())), t3 - t2))
        assert (table[[f"{c}_ns" for c in gaps.CAUSES]].sum(axis=1) == table["gap_ns"]).all()
        load_join_gaps = t3 - t0
        tables = perfetto_trace.tables_of(run, Window(start, end))
        t4, c4 = time.perf_counter(), time.process_time()
        trace = perfetto_trace.build_trace(tables)
        t5, c5 = time.perf_counter(), time.process_time()
        counts = perfetto_trace.counts(tables)
        events = sum(int(v) for v in counts.values()) + len(tables.runqueue) + len(tables.backlog) + len(tables.segments)
        rows.append((f"export ({len(trace) / 1e6:.1f} MB)", events, t5 - t4))
        print(f"{'step':<32}{'events':>12}{'seconds':>10}{'events/s':>14}")
        for name, n, sec in rows:
            print(f"{name:<32}{n:>12}{sec:>10.3f}{n / sec if sec > 0 else 0:>14.0f}")
        print(f"load + join + gaps: {load_join_gaps:.2f} s (target 3 s): {'met' if load_join_gaps <= 3 else 'NOT met'}")
        per_million = (t5 - t4) / events * 1e6 if events else float("nan")
        print(f"export: {events} events in {t5 - t4:.2f} s, {per_million:.2f} s per 10^6 events (target 1 s): "
              f"{'met' if per_million <= 1 else 'NOT met'}; {events / max(c5 - c4, 1e-9) / 1e6:.2f} M events per "
              f"CPU second (the wall figure on a shared machine waits for the CPU)")
        print("   counts: " + ", ".join(f"{k} {v}" for k, v in counts.items())
              + f", runqueue counters {len(tables.runqueue)}, backlog counters {len(tables.backlog)}, "
              f"flows {len(tables.segments)}")
        gaps_memory(run_dir)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
