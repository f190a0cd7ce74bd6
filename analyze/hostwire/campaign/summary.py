"""A short, human-readable summary of what one benchmark run logged."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from hostwire.read.bench import BenchResult

if TYPE_CHECKING:
    from hostwire.run_directory import Run


def df_bench_summary(bench: BenchResult) -> pd.DataFrame:
    """One row per process: role, kind (send, background), pid, bytes sent or received (whole run
    and within the window), writes or sieve rounds within the window, LF received, exit."""
    summary = bench.summary
    received = {r["index"]: r for r in summary.get("receivers", [])}
    rows = []
    for proc in summary.get("processes", []):
        row = {"role": proc["role"], "kind": proc["kind"], "pid": proc["pid"], "exit": proc["exit"]}
        if proc["kind"] == "send":
            recv = received.get(proc["index"], {})
            row.update(
                local_port=proc["local_port"], bytes_sent=proc["bytes_total"], bytes_sent_window=proc["bytes_window"],
                writes_window=proc["calls_window"], bytes_received=recv.get("bytes_total"),
                bytes_received_window=recv.get("bytes_window"), lf_received=recv.get("lf_received"),
            )
        else:
            row.update(sieve_rounds_window=proc["calls_window"], sieve_check_failures=proc["check_failures"])
        row["log_overflow"] = proc["overflow"]
        rows.append(row)
    return pd.DataFrame(rows)


def format_bench_summary(bench: BenchResult) -> str:
    summary = bench.summary
    start, end = bench.window_ns
    seconds = (end - start) / 1e9
    lines = [f"logging window: {seconds:g} s"]
    table = df_bench_summary(bench)
    senders = table[table["kind"] == "send"]
    counts = ["local_port", "bytes_sent", "bytes_sent_window", "writes_window"]
    for row in senders.astype({c: "int64" for c in counts}).itertuples():
        rate = row.bytes_sent_window * 8 / seconds / 1e6
        received = 0 if pd.isna(row.bytes_received) else int(row.bytes_received)
        lf = "?" if pd.isna(row.lf_received) else int(row.lf_received)
        lines.append(
            f"  {row.role:8} pid {row.pid:<7} port {row.local_port:<5}  "
            f"sent {row.bytes_sent:>11,} B  received {received:>11,} B  "
            f"window: {row.writes_window:>6} writes, {row.bytes_sent_window:>10,} B ({rate:.2f} Mbit/s)  "
            f"LF received {lf}"
        )
    for row in table[table["kind"] == "background"].itertuples():
        lines.append(f"  {row.role:8} pid {row.pid:<7} sieve rounds in window {int(row.sieve_rounds_window):>6}"
                     f"  check failures {int(row.sieve_check_failures)}")
    sync = summary.get("clock_sync", {})
    for phase in ("start", "end"):
        est = sync.get(phase, {})
        if est.get("samples"):
            lines.append(f"clock offset ({phase}): {est['offset_ns'] / 1e3:+.1f} us "
                         f"(round trip {est['rtt_ns'] / 1e3:.1f} us, {est['samples']} samples)"
                         + ("  <- the link had not quieted after the run: biased" if est.get("quiet") is False else ""))
    overflow = summary.get("losses", {}).get("log_overflow", 0)
    lines.append(f"log overflow: {overflow} events" + ("  <- raise --log-capacity" if overflow else ""))
    lines.append(f"status: {summary.get('status')}" + "".join(f"\n  {f}" for f in summary.get("failures", [])))
    return "\n".join(lines)


def format_run_metrics(run: Run | Path) -> str:
    """A few wire and kernel numbers of a recorded run (a Run or its directory, opened once; its
    capture decoded once): what `hostwire metrics` says in detail."""
    from hostwire.errors import HostwireError
    from hostwire.metrics import table
    from hostwire.metrics.needs import needs_of
    from hostwire.run_directory import Run, load_run

    lines = []
    try:
        if not isinstance(run, Run):
            run = load_run(run)
        result = table("sanity", run)
    except HostwireError as err:
        return f"metrics: {err}"
    sanity = result.set_index("counter")["value"]
    if "frames" in sanity:
        lines.append(
            f"wire: {int(sanity['frames'])} frames captured, {int(sanity.get('capture_drops', 0))} dropped; "
            f"impossible intervals {100 * sanity.get('impossible_share', 0):.2f} %; "
            f"TCP retransmissions {int(sanity.get('tcp_retransmissions', 0))}")
    if "wire_clock_residual_ns" in sanity and not pd.isna(sanity["wire_clock_residual_ns"]):
        ok = all(sanity.get(f"check.wire_clock_{p}", 1) == 1 for p in ("start", "end"))
        residual, bound = sanity["wire_clock_residual_ns"] / 1e3, sanity["wire_clock_bound_ns"] / 1e3
        lines.append(f"capture clock against the clock exchange on the wire: residual {residual:+.1f} us within "
                     f"+-{bound:.1f} us ({'agrees' if ok else 'DISAGREES: the capture is misaligned'})")
    lines.append(f"losses: trace overruns {_count(sanity, 'trace_overruns')}, tracer misses "
                 f"{_count(sanity, 'tracer_misses')}, log overflows {_count(sanity, 'log_overflows')}, "
                 f"shaper drops {_count(sanity, 'shaper_drops')}")
    if run.can(needs_of("fairness")) and run.can(needs_of("goodput")):
        try:
            fairness = table("fairness", run).set_index("stream")
            goodput = table("goodput", run).set_index("stream")
            lines.extend(_goodput_lines(goodput.loc["all"], fairness.loc["all"], sanity))
        except (HostwireError, KeyError):
            pass
    if sanity.get("marked"):
        lines.append("marked: " + "; ".join(result.attrs.get("marked_by", [])))
    lines.extend(_cpu_use_lines(run))
    lines.append(f"more: hostwire metrics {{intervals,bursts,idc,hurst,contract,fairness,goodput,sanity}} {run.path}")
    return "\n".join(lines)


def _goodput_lines(goodput: pd.Series, fairness: pd.Series, sanity: pd.Series) -> list[str]:
    """Goodput on the wire (unique payload bytes first seen in the window) and as the receivers
    read it, against the link's physical maximum; Jain's index of each."""
    if goodput.get("basis", "wire") == "wire":
        text = f"goodput {goodput['bit_s'] / 1e6:.2f} Mbit/s on the wire (unique payload bytes in the window)"
        if "app_bit_s" in goodput:
            text += f", {goodput['app_bit_s'] / 1e6:.2f} Mbit/s read by the receivers"
    else:
        text = f"goodput {goodput['bit_s'] / 1e6:.2f} Mbit/s read by the receivers (no capture)"
    if "goodput_max_bit_s" in sanity and not pd.isna(sanity["goodput_max_bit_s"]):
        text += f"; link maximum {sanity['goodput_max_bit_s'] / 1e6:.2f} Mbit/s"
        if sanity.get("goodput_above_max"):
            text += " (a figure above it: see marked)"
    jain = f"Jain's fairness index {fairness['jain']:.4f}"
    if fairness.get("basis") == "app" and "wire_jain" in fairness and not pd.isna(fairness["wire_jain"]):
        jain += f" (bytes read), {fairness['wire_jain']:.4f} on the wire"
    return [text, jain]


def _cpu_use_lines(run: Run) -> list[str]:
    """Busy and stolen shares of each CPU over the logging window, from raw/resources.tsv."""
    from hostwire.errors import HostwireError
    from hostwire.read.resources import df_cpu_use

    try:
        start, end = run.window_ns()
        use = df_cpu_use(run.df_resources())
    except HostwireError:
        return []
    inside = use[(use["t_start_ns"] >= start) & (use["t_end_ns"] <= end) & (use["cpu"] >= 0)]
    if inside.empty:
        return []
    shares = inside.groupby("cpu")[["busy_share", "steal_share"]].mean()
    parts = [f"CPU {cpu} busy {100 * row.busy_share:.0f} %, stolen {100 * row.steal_share:.0f} %"
             for cpu, row in shares.iterrows()]
    return ["host in the window: " + "; ".join(parts)]


def _count(sanity: pd.Series, key: str) -> str:
    value = sanity.get(key)
    return "unknown" if value is None or pd.isna(value) else str(int(value))
