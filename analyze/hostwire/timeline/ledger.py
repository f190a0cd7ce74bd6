"""The loss ledger of a run: where did frames and calls go missing? Per stream, what the benchmark
logged against what the capture and the tracer saw in the window, and the losses each collector
counted in the manifest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hostwire.errors import HostwireError
from hostwire.run_directory import load_run
from hostwire.timeline.build import Timeline


def loss_ledger(run_dir: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per flow (each sender's stream), within the logging window: bytes passed to send (the
    benchmark's record of its writes), payload frames and the span of payload bytes captured in
    the sender's direction. Per run:
    frames handed to the captured interface (net_dev_xmit in sched.tsv, every flow together: the
    event names no socket) against the frames captured leaving it. A gap is named where it lies:
    bytes written but never on the wire (still in the socket buffer at the end, or lost before the
    interface), or frames transmitted but not captured (lost by the capture)."""
    run = load_run(run_dir)
    flows: list[dict[str, Any]] = []
    try:
        frames = run.df_frames()
    except HostwireError:
        frames = None
    start, end = run.planned_window_ns()  # the benchmark logs its writes within its window only
    if frames is not None:
        frames = frames[(frames["t_ns"] >= start) & (frames["t_ns"] < end)]
    streams = Timeline.of(run).df_streams()
    writes = Timeline.of(run).writes()
    writes = writes[(writes["t_enter_ns"] >= start) & (writes["t_enter_ns"] < end)]
    sent = writes.groupby("stream")["bytes"].sum() if len(writes) else {}
    for s in streams.itertuples():
        if not str(s.sender_role).startswith("send-"):
            continue
        row: dict[str, Any] = {"stream": s.stream, "role": s.sender_role, "bytes_sent": int(sent.get(s.stream, 0))}
        if frames is not None:
            mine = frames[(frames["src"] == s.src) & (frames["sport"] == s.sport) & (frames["dst"] == s.dst)
                          & (frames["dport"] == s.dport) & (frames["payload_len"] > 0)]
            seq = mine["seq"].astype("int64").to_numpy()
            # unique payload: the span of sequence numbers (32-bit, relative to the first) covered
            rel = (seq - seq.min()) % (1 << 32) if len(seq) else seq
            ends = rel + mine["payload_len"].to_numpy()
            row["frames_captured"] = int(len(mine))
            row["bytes_on_wire"] = int(ends.max() - rel.min()) if len(seq) else 0
            gap = row["bytes_sent"] - row["bytes_on_wire"]
            row["gap_bytes"] = int(gap)
            row["where"] = ("none" if gap <= 0 else
                            "written but not on the wire (socket buffer at the end, or lost before the interface)")
        flows.append(row)
    _writes_against_tracer(run, flows, start, end)
    run_row: dict[str, Any] = {}
    if not (run_dir / "raw" / "wirecap.json").exists() or not (run_dir / "raw" / "sched.tsv").exists():
        return flows, {"note": "no per-run frame ledger: it needs the capture and the kernel trace"}
    try:
        meta = json.loads((run_dir / "raw" / "wirecap.json").read_text())
        iface = meta.get("interface")
        sched = run.df_sched()
        sender = set(streams.loc[streams["sender_role"].astype(str).str.startswith("send-"), "src"])
        ours = frames[frames["src"].isin(sender)] if frames is not None else None
        if ours is None or not len(ours):
            raise ValueError("no frame from the senders was captured")
        first, last = int(ours["t_ns"].min()), int(ours["t_ns"].max())
        xmit = int(((sched["event"] == "net_dev_xmit") & (sched["name"] == iface)
                    & (sched["t_ns"] >= first - 1_000_000) & (sched["t_ns"] <= last + 1_000_000)).sum())
        captured = int(len(ours))
        run_row = {"interface": iface, "frames_at_xmit": xmit, "frames_captured": captured,
                   "gap_frames": xmit - captured,
                   "where": "none" if xmit <= captured else
                   "transmitted but not among the captured IPv4 frames of the senders (capture drops, or "
                   "frames that are not IPv4 such as ARP)"}
    except (OSError, ValueError, HostwireError, KeyError) as err:
        run_row = {"note": f"no per-run frame ledger: {err}"}
    named = _named_losses(run.manifest)
    if named:  # a collector's own count of what it lost: the ledger's gaps are where it says
        run_row["losses"] = named
        run_row["where"] = "; ".join(named) + (
            "" if run_row.get("where") in (None, "none") else f"; and {run_row['where']}")
    return flows, run_row


def _writes_against_tracer(run: Any, flows: list[dict[str, Any]], start: int, end: int) -> None:
    """Adds to each flow the writes the benchmark logged in the window (`writes_logged`) and the
    sending calls the system-call tracer recorded on that stream in the same window
    (`writes_traced`, when the run traced them): one source checked against the other; the
    difference is a call one of them missed."""
    if not (run.path / "raw" / "syscalls.tsv").exists():
        return
    logged = run.df_writes()
    logged = logged[(logged["t_ns"] >= start) & (logged["t_ns"] < end)].groupby("stream").size()
    calls = Timeline.of(run).df_calls()
    calls = calls[calls["is_send"].to_numpy() & (calls["t_enter_ns"] >= start).to_numpy()
                  & (calls["t_enter_ns"] < end).to_numpy()].groupby("stream").size()
    for flow in flows:
        flow["writes_logged"] = int(logged.get(flow["stream"], 0))
        flow["writes_traced"] = int(calls.get(flow["stream"], 0))
        flow["writes_gap"] = flow["writes_logged"] - flow["writes_traced"]


def _named_losses(manifest: dict[str, Any]) -> list[str]:
    """Each loss a collector counted in the run, named by its source: the capture's drops (the
    frames it saw leave are fewer than were sent), the kernel trace's lost events (its
    net_dev_xmit count is then a lower bound), the tracer's misses, the shaper's drops."""
    from hostwire.metrics.losses import loss_category

    declared = manifest.get("loss_categories") or {}
    what = {"capture_drops": "the capture dropped {n} frame(s) ({key})",
            "trace_overruns": "the kernel trace lost {n} event(s) ({key}): its net_dev_xmit count is a lower bound",
            "tracer_misses": "the system-call tracer missed {n} call(s) ({key})",
            "shaper_drops": "the shaper dropped {n} frame(s) before the wire ({key})",
            "log_overflows": "the benchmark's log overflowed by {n} event(s) ({key})"}
    named = []
    for key, value in (manifest.get("losses") or {}).items():
        category = loss_category(key, declared)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0 and category in what:
            named.append(what[category].format(n=value, key=key))
    return named
