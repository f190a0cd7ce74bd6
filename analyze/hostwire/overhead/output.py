"""What `hostwire overhead` writes: overhead.md, overhead.csv, overhead.png, and the ratios of
hostwire's collectors against the peer tools measured in the same session."""

from __future__ import annotations

import csv
import io
import json
import logging
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from hostwire.safewrite import write_text, write_with
from hostwire.overhead.measure import Result
from hostwire.overhead.program import IPERF_PORT, RR_PORT
from hostwire.overhead.tools import CALLS_PER_RT, SWITCHES_PER_RT

log = logging.getLogger(__name__)


def _f(v: float, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    return f"{v:.{digits}f}"


def _rate(v: float) -> str:
    if v is None or math.isnan(v):
        return "-"
    if math.isinf(v):
        return "no measurable cost"
    return f"{v:,.0f}"


def markdown(result: Result) -> str:
    fifo = f"; the ping-pong at SCHED_FIFO {result.rt_prio}" if result.rt_prio else ""
    lines = [f"ping-pong: `hw-bench pingpong --loops {result.loops} --cpu {result.cpu}`, {result.runs} rounds "
             f"round-robin; collectors' own threads on CPU {result.tracer_cpu} (ptrace tracers on the ping-pong's "
             f"CPU){fifo}. Per round trip: {SWITCHES_PER_RT} context switches, {CALLS_PER_RT} system calls. "
             "Added cost: "
             "median over rounds of (configuration - bare of the same round) / units per round trip, 95 % "
             "bootstrap interval; `min` from the minima.", "",
             "| configuration | median µs/rt | p25-p75 µs/rt | min µs/rt | unit | added µs/unit | 95 % CI | "
             "added µs/unit (min) | units/s costing 1 % |",
             "|---|---:|---:|---:|---|---:|---|---:|---:|"]
    for r in result.rows:
        if r.status != "ok":
            lines.append(f"| {r.name} | {r.status}: {r.message} | | | | | | | |")
            continue
        ci = "-" if r.name == "bare" else f"[{_f(r.added_low_us)}, {_f(r.added_high_us)}]"
        lines.append(f"| {r.name} | {_f(r.median_rt_us)} | {_f(r.p25_rt_us)}-{_f(r.p75_rt_us)} | {_f(r.min_rt_us)} | "
                     f"{r.unit} | {_f(r.added_us)} | {ci} | {_f(r.added_min_us)} | "
                     f"{_rate(r.rate_1pct_per_s) if r.name != 'bare' else '-'} |")
    lines += ["", "Switch rates of your campaigns (runs/*/summary.parquet, `switches_per_s`), and the share of "
              "a CPU each scheduler tracer would cost at them (rate x added cost per switch):", ""]
    sched = [r for r in result.rows if r.unit == "switch" and r.name != "bare" and r.status == "ok"]
    if result.campaign_rates:
        lines += ["| campaign | runs | median switches/s | max switches/s | " +
                  " | ".join(f"{r.name} at max" for r in sched) + " |",
                  "|---|---:|---:|---:|" + "---:|" * len(sched)]
        for c in result.campaign_rates:
            shares = [f"{100 * c['max_switches_per_s'] * max(r.added_us, 0) * 1e-6:.2f} %" for r in sched]
            lines.append(f"| {c['campaign']} | {c['runs']} | {c['median_switches_per_s']:,.0f} | "
                         f"{c['max_switches_per_s']:,.0f} | " + " | ".join(shares) + " |")
    else:
        lines.append("no campaign summary with a switches_per_s column under runs/ (run `hostwire run` and "
                     "`hostwire analyze` first).")
    lines += ["", "Probe costs (`hw-bench probes`, ns per call, the empty loop subtracted):", "",
              "| probe | ns/call |", "|---|---:|"]
    for p in result.probes:
        lines.append(f"| {p['probe']} | {_f(p['ns_per_call'], 1) if not p['note'] else 'unavailable: ' + p['note']} |")
    if not result.probes:
        lines.append("| (not measured) | |")
    return "\n".join(lines) + "\n"


CSV_FIELDS = ["name", "what", "unit", "per_rt", "status", "message", "median_rt_us", "p25_rt_us", "p75_rt_us",
              "min_rt_us", "added_us", "added_low_us", "added_high_us", "added_min_us", "rate_1pct_per_s",
              "round_trips_us"]


def write_csv(result: Result, path: Path) -> None:
    text = io.StringIO(newline="")
    w = csv.DictWriter(text, fieldnames=CSV_FIELDS)
    w.writeheader()
    for r in result.rows:
        d = asdict(r)
        d["round_trips_us"] = " ".join(_f(x) for x in r.round_trips_us)
        w.writerow({k: d[k] for k in CSV_FIELDS})
    write_text(path, text.getvalue())


def plot(result: Result, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only, never a display
    import matplotlib.pyplot as plt

    rows = [r for r in result.rows if r.status == "ok" and r.name != "bare" and math.isfinite(r.added_us)]
    fig, ax = plt.subplots(figsize=(7.0, 0.45 * max(len(rows), 3) + 1.2))
    y = np.arange(len(rows))
    med = np.array([r.added_us for r in rows])
    lo = np.array([r.added_low_us for r in rows])
    hi = np.array([r.added_high_us for r in rows])
    err = np.vstack([np.nan_to_num(med - lo), np.nan_to_num(hi - med)]).clip(min=0)
    ax.barh(y, med, xerr=err, color=["tab:blue" if r.unit == "switch" else "tab:orange" for r in rows],
            capsize=3)
    ax.set_yticks(y, [f"{r.name} (per {r.unit})" for r in rows])
    ax.invert_yaxis()
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xscale("symlog", linthresh=0.1)
    ax.set_xlabel("added µs per switch (blue) or per traced call (orange), 95 % CI")
    ax.set_title(f"probe effect on hw-bench pingpong\n{result.runs} rounds of {result.loops} round trips",
                 fontsize=10)
    fig.tight_layout()
    write_with(path, lambda handle: fig.savefig(handle, format="png", dpi=120))
    plt.close(fig)


def write_outputs(result: Result, out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    md, csv_path, png = out_dir / "overhead.md", out_dir / "overhead.csv", out_dir / "overhead.png"
    text = markdown(result) if result.rows else ""
    if result.program_rows:
        text += ("\n" if text else "") + program_markdown(result) + "\n" + "\n".join(program_ratio_lines(result)) + "\n"
        write_program_csv(result, out_dir / "overhead-program.csv")
    if result.accuracy:
        text += "\n" + accuracy_markdown(result.accuracy, result.accuracy[0].get("repeats", 0) or 0)
    write_text(md, "# hostwire overhead\n\n" + text)
    write_csv(result, csv_path)
    plot(result, png)
    write_text(out_dir / "overhead.json", json.dumps(result.to_json(), indent=1) + "\n")
    return [md, csv_path, png]


def ratio_lines(result: Result) -> list[str]:
    """The comparisons with the peers (the lines the earlier benchmark scripts printed)."""
    out = []

    def ratio(a: str, b: str, label: str, target: str) -> None:
        ra, rb = result.row(a), result.row(b)
        if not ra or not rb or ra.status != "ok" or rb.status != "ok":
            out.append(f"ratio {label}: not measured ({a if not ra or ra.status != 'ok' else b} missing)")
            return
        if rb.added_min_us <= 0 and rb.added_us <= 0:
            out.append(f"ratio {label}: undefined ({b} added nothing measurable)")
            return
        parts = []
        if rb.added_min_us > 0:
            parts.append(f"{ra.added_min_us / rb.added_min_us:.2f} from minima")
        if rb.added_us > 0:
            parts.append(f"{ra.added_us / rb.added_us:.2f} from paired medians")
        out.append(f"ratio {label}: {', '.join(parts)} ({target})")

    ratio("hw-schedtrace", "trace-cmd record", "hw-schedtrace / trace-cmd added cost per switch (same events)",
          "target <= 1.10")
    ratio("hw-schedtrace", "perf sched record", "hw-schedtrace / perf sched record added cost per switch",
          "for information")
    ratio("hw-iotrace ptrace", "strace -f", "hw-iotrace ptrace / strace -f added cost per call", "target <= 0.5")
    ratio("ptrace floor", "strace -f", "ptrace floor / strace -f added cost per call (the least a ptrace tracer pays)",
          "for information")
    pre = result.row("hw-iotrace preload")
    if pre and pre.status == "ok":
        ns = pre.added_us * 1000
        out.append(f"hw-iotrace preload added cost per call on the ping-pong: {ns:.0f} ns "
                   f"[{pre.added_low_us * 1000:.0f}, {pre.added_high_us * 1000:.0f}] (the < 100 ns target is "
                   "judged on bench_iotrace.py's write loop)")
    return out


def accuracy_markdown(table: list[dict[str, Any]], repeats: int) -> str:
    lines = [f"Accuracy (MSHN method): the default grid point recorded {repeats} times with no collector and "
             f"{repeats} times with each set (alternating); mean difference set - none of the same repetition, "
             "95 % t-interval; goodput and Jain's index on the receivers' basis.", "",
             "| collectors | metric | without collectors | difference | 95 % CI | verdict |",
             "|---|---|---:|---:|---|---|"]
    for r in table:
        lines.append(f"| {r['collectors']} | {r['metric']} | {_f(r['baseline_mean'])} | {_f(r['diff'])} | "
                     f"[{_f(r['low'])}, {_f(r['high'])}] | {r['verdict']} |")
    ledgers = [(r["collectors"], r["ledger"]) for r in table if r.get("ledger")]
    if ledgers:
        lines += ["", "Loss ledger of each set's last run (bytes passed to send, from the benchmark's log; "
                  "frames at net_dev_xmit on the captured interface, from sched.tsv; frames captured):", "",
                  "| collectors | flow | bytes sent | bytes on the wire | payload frames captured | gap | where |",
                  "|---|---|---:|---:|---:|---:|---|"]
        for name, ledger in ledgers:
            for f in ledger["flows"]:
                lines.append(f"| {name} | {f['role']} {f['stream']} | {f['bytes_sent']} | {f.get('bytes_on_wire', '-')} | "
                             f"{f.get('frames_captured', '-')} | {f.get('gap_bytes', '-')} B | {f.get('where', 'no capture')} |")
            run = ledger["run"]
            if "frames_at_xmit" in run:
                lines.append(f"| {name} | all flows, {run['interface']} | | | {run['frames_at_xmit']} at xmit, "
                             f"{run['frames_captured']} captured | {run['gap_frames']} frames | {run['where']} |")
            elif run.get("note"):
                lines.append(f"| {name} | all flows | | | | | {run['note']} |")
    return "\n".join(lines) + "\n"


def _gbit(v: float) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v / 1e9:.3f}"


def program_markdown(result: Result) -> str:
    st = result.program_settings
    lines = [f"program: `iperf3 -c 198.18.0.2 -p {IPERF_PORT} -t {st.get('seconds')} -J` (throughput) and "
             f"`tcp-rr 198.18.0.2 {RR_PORT} {st.get('rr_loops')}` (one-byte TCP round trips, their mean), the "
             "client in the sender's namespace, the servers untraced in the receiver's, over a bare veth "
             f"(no shaper: the CPU limits); {st.get('runs')} rounds round-robin"
             f"{'; the program, its tool and the servers at SCHED_FIFO ' + str(st['rt_prio']) if st.get('rt_prio') else ''}"
             ". Ratios: median over rounds of "
             "configuration / alone in the same round, 95 % bootstrap interval; throughput on the receiver's "
             "count.", "",
             "| configuration | receiver Gbit/s (p25-p75) | sender Gbit/s | throughput / alone | 95 % CI | "
             "round trip µs (p25-p75) | round trip / alone | 95 % CI | added µs/round trip | 95 % CI |",
             "|---|---:|---:|---:|---|---:|---:|---|---:|---|"]
    for r in result.program_rows:
        if r.status != "ok":
            lines.append(f"| {r.name} | {r.status}: {r.message} | | | | | | | | |")
            continue
        alone = r.name == "alone"
        lines.append(
            f"| {r.name} | {_gbit(r.median_receiver_bps)} ({_gbit(r.p25_receiver_bps)}-{_gbit(r.p75_receiver_bps)}) | "
            f"{_gbit(r.median_sender_bps)} | {_f(r.throughput_ratio, 2)} | "
            f"{'-' if alone else f'[{_f(r.throughput_ratio_low, 2)}, {_f(r.throughput_ratio_high, 2)}]'} | "
            f"{_f(r.median_rr_us, 1)} ({_f(r.p25_rr_us, 1)}-{_f(r.p75_rr_us, 1)}) | {_f(r.rr_ratio, 2)} | "
            f"{'-' if alone else f'[{_f(r.rr_ratio_low, 2)}, {_f(r.rr_ratio_high, 2)}]'} | "
            f"{'-' if alone else _f(r.rr_added_us, 1)} | "
            f"{'-' if alone else f'[{_f(r.rr_added_low_us, 1)}, {_f(r.rr_added_high_us, 1)}]'} |")
    return "\n".join(lines) + "\n"


PROGRAM_CSV_FIELDS = ["name", "what", "status", "message", "median_receiver_bps", "p25_receiver_bps",
                      "p75_receiver_bps", "median_sender_bps", "throughput_ratio", "throughput_ratio_low",
                      "throughput_ratio_high", "sender_ratio", "median_rr_us", "p25_rr_us", "p75_rr_us", "rr_ratio",
                      "rr_ratio_low", "rr_ratio_high", "rr_added_us", "rr_added_low_us", "rr_added_high_us",
                      "sender_bps", "receiver_bps", "rr_us", "rr_p50_us"]


def write_program_csv(result: Result, path: Path) -> None:
    text = io.StringIO(newline="")
    w = csv.DictWriter(text, fieldnames=PROGRAM_CSV_FIELDS)
    w.writeheader()
    for r in result.program_rows:
        d = asdict(r)
        for key in ("sender_bps", "receiver_bps", "rr_us", "rr_p50_us"):
            d[key] = " ".join(_f(x) for x in d[key])
        w.writerow({k: d[k] for k in PROGRAM_CSV_FIELDS})
    write_text(path, text.getvalue())


def program_ratio_lines(result: Result) -> list[str]:
    """Each tool's cost on the program, and record against each peer on iperf3's throughput in
    the same rounds (above 1: the program keeps more of its throughput under record)."""
    from hostwire.stats import paired_ratio

    out = []
    for r in result.program_rows:
        if r.name == "alone" or r.status != "ok":
            continue
        out.append(f"iperf3 under {r.name}: throughput {_f(r.throughput_ratio, 2)} of alone "
                   f"[{_f(r.throughput_ratio_low, 2)}, {_f(r.throughput_ratio_high, 2)}]; round trip "
                   f"{_f(r.rr_ratio, 2)} x alone, {r.rr_added_us:+.1f} µs")
    for mine in ("record tracefs", "record ptrace"):
        for peer in ("perf trace", "strace -f", "trace-cmd record -F"):
            a, b = result.program_row(mine), result.program_row(peer)
            label = f"ratio {mine} / {peer} iperf3 throughput (same rounds)"
            if not a or not b or a.status != "ok" or b.status != "ok":
                out.append(f"{label}: not measured ({mine if not a or a.status != 'ok' else peer} missing)")
                continue
            est = paired_ratio(a.receiver_bps, b.receiver_bps)
            out.append(f"{label}: {_f(est.median, 2)} [{_f(est.low, 2)}, {_f(est.high, 2)}] (for information)")
    # the cost of the calls a program blocks in (waited_in): record with them over record without
    a, b = result.program_row("record tracefs"), result.program_row("record tracefs --no-waits")
    if a and b and a.status == "ok" and b.status == "ok":
        est = paired_ratio(a.receiver_bps, b.receiver_bps)
        out.append(f"ratio record tracefs / record tracefs --no-waits iperf3 throughput (same rounds; the cost of "
                   f"the wait calls): {_f(est.median, 2)} [{_f(est.low, 2)}, {_f(est.high, 2)}]")
    return out
