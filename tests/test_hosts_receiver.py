"""The receiver's host in the gap causes (docs/timeline.md, "The receiver's host"), over real ssh
(tests/hostlab.py): a receiver on a host of its own with two sieves pinned to its CPU
(`receiver_background`), the sender on the other CPU on a fast link. The receiver host's kernel
trace, put on the sender's clock by the manifest's chosen method, must name the receiver's
preemption there, by the sieves, for most of the gaps' receiver_window time. The lab's hosts share
this machine's kernel, so the receiver and its sieves are pinned to one CPU and the sender to the
other."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import hostwire
from hostwire.timeline import gap_sources, gaps
from hostwire.timeline.build import Timeline
from hostwire.window import Window

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this file (importlib mode)
import hostlab  # noqa: E402

pytestmark = [pytest.mark.privileged("netns", "tracefs"), pytest.mark.long,
              pytest.mark.skipif(not Path(hostlab.SSHD).exists(), reason="needs openssh-server (make setup)")]
PARTS = [f"{c}_ns" for c in gaps.CAUSES]
RX_PARTS = [f"{c}_ns" for c in gaps.RECEIVER_PARTS]
# The sieves' share of the receiver's preempted time: 0.40-0.86 over 12 runs (median 0.72) while
# other work of this shared machine also ran on the receiver's CPU; the receiver's preemption was
# 85.5-97.0 % of the receiver_window time (median 91.5 %) against the 80 % asked for.
SIEVE_SHARE = 0.3


@pytest.fixture
def lab(tmp_path: Path) -> Iterator["hostlab.Lab"]:
    lab = hostlab.make_lab(tmp_path, bottleneck="")  # the receiver's CPU, not a slow hop, is the limit
    try:
        yield lab.open()
    finally:
        lab.close()


def test_sieves_on_the_receivers_cpu_are_named_in_its_window_gaps(lab: "hostlab.Lab") -> None:
    out = lab.root.parent / "runs" / "rx"
    grid = ('senders = [1]\nbackground = [0]\nreceiver_background = [2]\nsender_cpus = ["0"]\n'
            'receiver_cpus = ["1"]\nlink_rate = ["1gbit"]')
    config = hostlab.campaign_file(lab.root / "rx.toml", lab, grid=grid, repetitions=1, kernel_trace=True,
                                   duration_s=2.0, shape=False)
    proc = hostlab.run(config, out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    book = json.loads((out / "campaign.json").read_text())
    assert [r["status"] for r in book["runs"]] == ["complete"], book["runs"]
    assert hostlab.wait_nothing_left(lab) == {"tx": [], "rx": [], "cap": []}  # the sieves stopped with the run
    run = hostwire.load_run(out / book["runs"][0]["run_id"])
    assert (run.path / "raw" / "hosts" / "receiver" / "sched.tsv").is_file()
    overruns = run.manifest["losses"]["trace_overruns"]  # both hosts' traces counted, by role
    assert {"sender_sched_lost_events", "receiver_sched_lost_events"} <= set(overruns), overruns
    # the receiver's user-space clocks are 2000 s ahead of its kernel's (a time namespace): its
    # trace's check is that the pair between them stayed put, not that they are equal
    assert overruns["receiver_sched_clock_check_ok"] is True, overruns
    assert Timeline.of(run).clock().method == "hosts-traffic"
    inputs = gap_sources.gap_inputs(run)
    assert inputs.receiver_host is not None and inputs.receivers == {}, "the receiver is not a task of tx's trace"
    start, end = run.window_ns()
    data = inputs.data[(inputs.data["t_ns"] >= start) & (inputs.data["t_ns"] <= end)]
    p99 = int(np.percentile(data.sort_values("t_ns").groupby("stream")["t_ns"].diff().dropna().to_numpy(), 99))
    table, _ = gaps.explain(inputs, min_gap_ns=p99, window=Window(start, end))
    report = gaps.summary(table).to_string()
    assert len(table) >= 10, report
    assert (table[PARTS].sum(axis=1) == table["gap_ns"]).all()
    assert (table[RX_PARTS].sum(axis=1) == table["receiver_window_ns"]).all()  # a split of receiver_window
    window_ns = int(table["receiver_window_ns"].sum())
    assert (table["receiver_window_ns"] > 0).sum() >= 10, report  # the receiver held the stream back, often
    preempted_ns = int(table["receiver_preempted_ns"].sum())
    assert preempted_ns >= 0.8 * window_ns, (preempted_ns, window_ns, report)
    # its preempters there are mostly the sieves (hw-bench on the receiver's host that is not the
    # receiver); the rest is other work of this shared machine on that CPU
    assert sieve_share(table) >= SIEVE_SHARE, table["receiver_preempted_by"].head(10).tolist()


def sieve_share(table: pd.DataFrame) -> float:
    """The sieves' share of the receiver's preempted time, from receiver_preempted_by's shares."""
    by_sieves = 0.0
    for ns, named in zip(table["receiver_preempted_ns"], table["receiver_preempted_by"]):
        for entry in filter(None, str(named).split("; ")):
            pid, comm, role, share = entry.rsplit(" ", 3)
            by_sieves += ns * float(share.rstrip("%")) / 100 if role == "receiver_background" else 0.0
    return by_sieves / max(int(table["receiver_preempted_ns"].sum()), 1)
