#!/usr/bin/env python3
"""make soak: configs/soak.toml (20 senders, 20 background processes, every collector, the default
topology) recorded for SOAK_MINUTES (default 60), then checked:
  1. disk: `hostwire run --dry-run` predicts the run's size before it starts (the soak refuses to
     start when the file system has less free space than that); the run directory must come
     within DISK_TOLERANCE of the prediction;
  2. no loss in any collector: every loss counter of the manifest 0 (the capture's drops, the
     kernel trace's and the system-call trace's lost and missed events, the benchmark's log
     overflows and sieve failures), the trace clock check passed, the run complete; the shaper's
     drops are the link's behaviour, not a collector's loss, and are only reported;
  3. memory flat: the anonymous memory (hostwire.procmem) of the runner and of each collector,
     sampled every 10 s, grows by at most 5 % after the first 5 minutes (a third of the window
     when it is shorter than 15 minutes);
  4. analysis in bounded memory: `hostwire metrics idc`, `intervals` and `contract` on the run's
     capture with the chunked engine, then `hostwire gaps --engine slabs --summary` on the whole
     run (its kernel trace, capture and system calls), each at most 1 GB of anonymous memory.
Prints the figures as a Markdown table for docs/performance.md and writes them to
OUT/soak-figures.json. Exit 0 when every check passes, 1 otherwise.
Usage: perf/soak.py [--minutes M] [--out DIR] [--keep]"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "analyze"))

from hostwire.procmem import Sampler, tree_processes  # noqa: E402

CONFIG = REPO / "configs" / "soak.toml"
PYTHON = str(REPO / ".venv" / "bin" / "python")
SAMPLE_S = 10.0
GROWTH_LIMIT = 0.05
DISK_TOLERANCE = 0.5
MEMORY_LIMIT = 10**9
COLLECTORS = ("hw-wirecap", "hw-schedtrace", "hw-iotrace")
LOSS_KEYS = ("wire_ps_drop", "wire_ps_ifdrop", "sched_lost_events", "sched_missed_in_stream",
             "syscalls_lost_events", "syscalls_missed_in_stream", "bench_log_overflow", "sieve_check_failures")


def hostwire(*args: str) -> list[str]:
    return [PYTHON, "-m", "hostwire", *args]


def env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO / "analyze"))


def predicted_bytes(minutes: float) -> int:
    out = subprocess.run(hostwire("run", str(CONFIG), "--dry-run", "--set", f"duration_s={minutes * 60:g}"),
                         capture_output=True, text=True, env=env(), check=True).stdout
    found = re.search(r"estimated disk: .*\((\d+) bytes", out)
    if not found:
        raise SystemExit(f"soak: no disk estimate in the dry run's output:\n{out}")
    return int(found.group(1))


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def record(out: Path, minutes: float) -> tuple[int, list[dict]]:
    """Runs the campaign, sampling the runner's tree every SAMPLE_S: (exit status, samples)."""
    cmd = hostwire("run", str(CONFIG), "--set", f"duration_s={minutes * 60:g}", "--out", str(out), "--no-progress")
    proc = subprocess.Popen(cmd, env=env(), cwd=REPO)
    samples: list[dict] = []
    t0 = time.monotonic()
    try:
        while proc.poll() is None:
            processes = tree_processes(proc.pid)
            samples.append({"t_s": round(time.monotonic() - t0, 1), "processes": [
                {"pid": pid, "name": name, "anon_bytes": anon} for pid, name, anon in processes]})
            try:
                proc.wait(timeout=SAMPLE_S)
            except subprocess.TimeoutExpired:
                pass
    except BaseException:
        proc.terminate()  # the runner tears its run down on SIGTERM and keeps it, marked partial
        proc.wait()
        raise
    return proc.returncode, samples


def series(samples: list[dict], root_pid: int) -> dict[str, list[tuple[float, int]]]:
    """Per tracked process ("runner", each collector by name, "tree"): (t, anonymous bytes)."""
    out: dict[str, list[tuple[float, int]]] = {}
    for sample in samples:
        total = 0
        for p in sample["processes"]:
            total += p["anon_bytes"]
            key = "runner" if p["pid"] == root_pid else p["name"] if p["name"] in COLLECTORS else None
            if key:
                out.setdefault(key, []).append((sample["t_s"], p["anon_bytes"]))
        out.setdefault("tree", []).append((sample["t_s"], total))
    return out


def growth(points: list[tuple[float, int]], settle_s: float, window_end_s: float) -> float | None:
    """Largest later value over the first one after settle_s, minus 1; within the recording only."""
    later = [v for t, v in points if settle_s <= t <= window_end_s]
    if len(later) < 2 or later[0] == 0:
        return None
    return max(later) / later[0] - 1


def analyse(pcap: Path, scratch: Path) -> list[dict]:
    rows = []
    for kind, extra in (("idc", []), ("intervals", []), ("contract", ["--link-rate", "10mbit"])):
        cmd = hostwire("metrics", kind, str(pcap), "--engine", "chunked", *extra)
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=dict(env(), HOSTWIRE_SCRATCH=str(scratch)), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        with Sampler([proc.pid], interval_s=0.05) as sampler:
            _, err = proc.communicate()
        rows.append({"kind": kind, "seconds": round(time.perf_counter() - t0, 2), "peak_bytes": sampler.peak,
                     "exit": proc.returncode, "error": err.decode(errors="replace").strip()[-300:]})
    return rows


def analyse_gaps(run: Path) -> dict:
    """`hostwire gaps RUN --engine slabs --summary`: the gap causes of the whole run, its kernel
    trace read in slabs, its capture in chunks and its system calls in pieces."""
    cmd = hostwire("gaps", str(run), "--engine", "slabs", "--summary")
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with Sampler([proc.pid], interval_s=0.05) as sampler:
        out, err = proc.communicate()
    return {"kind": "gaps --engine slabs", "seconds": round(time.perf_counter() - t0, 2), "peak_bytes": sampler.peak,
            "exit": proc.returncode, "summary": out.decode(errors="replace").strip().splitlines()[-1:],
            "trace_bytes": (run / "raw" / "sched.tsv").stat().st_size,
            "error": err.decode(errors="replace").strip()[-300:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=float(os.environ.get("SOAK_MINUTES", "60")))
    parser.add_argument("--out", type=Path, help="campaign directory (default runs/soak-<time>)")
    parser.add_argument("--keep", action="store_true", help="keep the run (default: removed once checked)")
    args = parser.parse_args()
    out = args.out or REPO / "runs" / time.strftime("soak-%Y%m%d-%H%M%S")
    out.parent.mkdir(parents=True, exist_ok=True)
    predicted = predicted_bytes(args.minutes)
    free = shutil.disk_usage(out.parent).free
    if free < predicted * 1.1:
        print(f"soak: the run will take about {predicted / 1e9:.1f} GB (hostwire run --dry-run) and "
              f"{out.parent} has {free / 1e9:.1f} GB free; free space or shorten SOAK_MINUTES", file=sys.stderr)
        return 1
    print(f"-- soak: {args.minutes:g} min of configs/soak.toml into {out}; predicted disk {predicted / 1e9:.2f} GB")
    code, samples = record(out, args.minutes)
    runs = [p for p in out.iterdir() if p.is_dir() and (p / "manifest.json").exists()]
    checks: dict[str, bool] = {"runner exit 0": code == 0, "one run recorded": len(runs) == 1}
    figures: dict = {"minutes": args.minutes, "predicted_disk_bytes": predicted, "samples": len(samples)}
    if len(runs) == 1:
        run = runs[0]
        manifest = json.loads((run / "manifest.json").read_text())
        losses = manifest.get("losses", {})
        actual = du(run)
        figures.update(run=run.name, status=manifest.get("status"), disk_bytes=actual,
                       disk_ratio=round(actual / predicted, 3), losses=losses)
        checks["run complete"] = manifest.get("status") == "complete"
        checks["no collector loss"] = all(losses.get(k) == 0 for k in LOSS_KEYS) and bool(
            losses.get("sched_clock_check_ok", False))
        checks[f"disk within {DISK_TOLERANCE:.0%} of --dry-run"] = abs(actual / predicted - 1) <= DISK_TOLERANCE
        # t counts from the runner's start; the logging window ends after set-up and warm-up, so up
        # to minutes * 60 every sample is of the recording, none of the collectors' stop work
        window_end = args.minutes * 60
        settle = min(300.0, args.minutes * 60 / 3)
        mem = series(samples, samples[0]["processes"][0]["pid"] if samples else -1)
        figures["memory"] = {}
        for key, points in sorted(mem.items()):
            g = growth(points, settle, window_end)
            settled = [v for t, v in points if settle <= t <= window_end]
            figures["memory"][key] = {"settled_bytes": settled[0] if settled else None,
                                      "series": [[t, v] for t, v in points],
                                      "max_bytes": max(v for _, v in points),
                                      "growth_after_settle": None if g is None else round(g, 4)}
            if key != "tree":
                checks[f"{key} memory flat (<= {GROWTH_LIMIT:.0%} growth after {settle / 60:g} min)"] = (
                    g is not None and g <= GROWTH_LIMIT)
        missing = [c for c in ("hw-wirecap", "hw-schedtrace") if c not in mem]
        checks["collectors sampled"] = not missing
        scratch = out / "scratch"
        scratch.mkdir(exist_ok=True)
        figures["analysis"] = analyse(run / "raw" / "wire.pcap", scratch)
        shutil.rmtree(scratch, ignore_errors=True)
        for row in figures["analysis"]:
            checks[f"metrics {row['kind']} chunked <= 1 GB"] = row["exit"] == 0 and row["peak_bytes"] <= MEMORY_LIMIT
        figures["gaps"] = analyse_gaps(run)
        checks["gaps --engine slabs on the whole run <= 1 GB"] = (figures["gaps"]["exit"] == 0
                                                                  and figures["gaps"]["peak_bytes"] <= MEMORY_LIMIT)
    figures["checks"] = checks
    (out / "soak-figures.json").write_text(json.dumps(figures, indent=1) + "\n")
    print(table(figures))
    if not args.keep:
        for run in runs:
            shutil.rmtree(run, ignore_errors=True)
    return 0 if all(checks.values()) else 1


def table(f: dict) -> str:
    lines = [f"| soak, {f['minutes']:g} min | value |", "|---|---|"]
    if "disk_bytes" in f:
        lines.append(f"| disk: predicted / measured | {f['predicted_disk_bytes'] / 1e9:.2f} GB / "
                     f"{f['disk_bytes'] / 1e9:.2f} GB ({f['disk_ratio']:.2f}x) |")
        lost = {k: v for k, v in f["losses"].items() if k in LOSS_KEYS}
        lines.append(f"| collector losses | {', '.join(f'{k} {v}' for k, v in lost.items())} |")
        lines.append(f"| shaper drops (the link's) | {f['losses'].get('qdisc_drops')} |")
        for key, m in f.get("memory", {}).items():
            g = m["growth_after_settle"]
            at = "n/a" if m["settled_bytes"] is None else f"{m['settled_bytes'] / 1e6:.1f} MB"
            lines.append(f"| memory {key}: settled / max / growth after settling | {at} / "
                         f"{m['max_bytes'] / 1e6:.1f} MB / {'n/a' if g is None else f'{g:+.1%}'} |")
        for row in f.get("analysis", []):
            lines.append(f"| metrics {row['kind']} --engine chunked on the capture | {row['seconds']} s, "
                         f"{row['peak_bytes'] / 1e6:.0f} MB peak{'' if row['exit'] == 0 else ', exit ' + str(row['exit'])} |")
    if "gaps" in f:
        g = f["gaps"]
        lines.append(f"| gaps --engine slabs on the run ({g['trace_bytes'] / 1e9:.1f} GB of kernel trace) | "
                     f"{g['seconds']} s, {g['peak_bytes'] / 1e6:.0f} MB peak{'' if g['exit'] == 0 else ', exit ' + str(g['exit'])} |")
    lines.append(f"| samples (every {SAMPLE_S:g} s) | {f['samples']} |")
    for name, ok in f["checks"].items():
        lines.append(f"| check: {name} | {'pass' if ok else 'FAIL'} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
