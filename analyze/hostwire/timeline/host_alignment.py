"""Every host's clocks on the sender's after a run on real hosts (docs/hosts.md): each method's
fit (timeline.clocks on the benchmark's UDP exchanges, timeline.hostclocks on the traffic both
captures saw), which one the timeline uses, and the canonical raw/wirecap.json of the capture
host. The recording of a run on hosts is handed `align` (record.hosts_runner.AlignClocks)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from hostwire.manifest import write_json_atomic
from hostwire.read.bench import load_bench
from hostwire.read.pcap import read_pcap
from hostwire.timeline.clocks import fit
from hostwire.timeline.hostclocks import monotonic_offset, pairs_onto_sender, realtime_minus_monotonic, traffic_fit


def _pairs(path: Path) -> list[dict[str, int]]:
    return json.loads(path.read_text()).get("clock_pairs") or []


def align(raw: Path, machines: dict[str, str], address: str) -> dict[str, Any]:
    """Per host other than the sender: each method's offset (its clock minus the sender's), drift
    and bound in microseconds, the clocks it aligns, and which one the timeline uses. Writes the
    canonical raw/wirecap.json: the capture host's, its pairs put onto the sender's clock. `machines`
    names the folder under raw/hosts/ of the machine that plays each role (sender, receiver,
    capture), its first role's."""
    sender_role = machines["sender"]
    folders = list(dict.fromkeys(machines.values()))
    out: dict[str, Any] = {"reference": f"{sender_role}: CLOCK_MONOTONIC (user space)"}
    sender_dir = raw / "hosts" / sender_role
    frames: dict[str, Any] = {}
    for role in folders:
        if (raw / "hosts" / role / "wire.pcap").exists():
            frames[role] = read_pcap(raw / "hosts" / role / "wire.pcap")
    receiver_role = machines["receiver"]
    udp = None
    if (raw / "bench" / "main.tsv").exists():
        sync = load_bench(raw / "bench").df_clock_sync()
        udp = fit(sync, pd.DataFrame({"t_send_ns": [], "upper_ns": []}))
    for role in folders:
        if role == sender_role:
            continue
        entry: dict[str, Any] = {}
        if role == receiver_role and udp is not None:
            entry["udp"] = {"aligns": "CLOCK_MONOTONIC (user space) of the receiver onto the sender's",
                            "offset_us": udp.offset_ns / 1e3, "drift_ppm": udp.drift_ppm,
                            "t_ref_monotonic_ns": int(udp.t_ref_ns),
                            "bound_us": udp.bound_ns / 1e3, "start_rtt_us": udp.start_rtt_ns / 1e3,
                            "end_rtt_us": None if udp.end_rtt_ns is None else udp.end_rtt_ns / 1e3}
        if sender_role in frames and role in frames:
            hull = traffic_fit(frames[sender_role], frames[role], address)
            if hull is not None:
                mono = monotonic_offset(hull, _pairs(sender_dir / "wirecap.json"),
                                        _pairs(raw / "hosts" / role / "wirecap.json"))
                entry["traffic"] = {"aligns": "the kernels' capture stamps (CLOCK_REALTIME) onto the sender's",
                                    "offset_us": hull.offset_ns / 1e3, "drift_ppm": hull.drift_ppm,
                                    "bound_us": hull.bound_ns / 1e3, "frames_toward": hull.upper,
                                    "frames_from": hull.lower, "crossed_us": hull.crossed_ns / 1e3,
                                    "monotonic_offset_us": mono / 1e3,
                                    "t_ref_monotonic_ns": int(hull.t_ref_ns - realtime_minus_monotonic(
                                        _pairs(sender_dir / "wirecap.json")))}
                entry["_hull"] = hull
        bounds = {m: entry[m]["bound_us"] for m in ("udp", "traffic") if m in entry}
        bounds = {m: b for m, b in bounds.items() if b == b}  # NaN: the bounds crossed
        entry["chosen"] = min(bounds, key=bounds.__getitem__) if bounds else None
        out[role] = entry
    capture_role = machines["capture"]
    sender_json = sender_dir / "wirecap.json"
    if capture_role == sender_role and sender_json.exists():
        os.link(sender_json, raw / "wirecap.json")
    elif (raw / "hosts" / capture_role / "wirecap.json").exists() and sender_json.exists():
        hull = out.get(capture_role, {}).get("_hull")
        meta = json.loads((raw / "hosts" / capture_role / "wirecap.json").read_text())
        if hull is not None:
            meta["clock_pairs_recorded"] = meta.get("clock_pairs")
            meta["clock_pairs"] = pairs_onto_sender(hull, _pairs(sender_json))
            meta["clock_pairs_from"] = f"the traffic method against hosts/{sender_role}/wirecap.json"
        write_json_atomic(raw / "wirecap.json", meta)
    for entry in out.values():
        if isinstance(entry, dict):
            entry.pop("_hull", None)
    for role in folders:  # each traced host's pair of its kernel and user-space clocks
        sched = raw / "hosts" / role / "sched.json"
        if sched.exists():
            check = json.loads(sched.read_text()).get("clock_check") or {}
            diffs = [check[k]["diff_ns"] for k in ("start", "stop") if isinstance(check.get(k), dict)]
            out.setdefault(role, {})["trace_pair"] = {
                "aligns": "the kernel trace's clock onto this host's user-space CLOCK_MONOTONIC (trace_marker stamps)",
                "trace_minus_user_us": [d / 1e3 for d in diffs]}
    return out
