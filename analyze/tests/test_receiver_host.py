"""The receiver's host in the gap causes (hostwire.timeline.receiver_host) against a hand-built
timeline: which part of a gap's receiver_window time the receiver spent preempted on its host,
asleep, or neither, and who preempted it there."""

from __future__ import annotations

import pandas as pd

from hostwire.timeline import gap_tables, gaps, receiver_host

RX, SIEVE, OTHER = 7, 30, 31
STATES = ["pid", "t_start_ns", "t_end_ns", "state", "cpu"]
RUNNING = ["cpu", "t_start_ns", "t_end_ns", "pid", "comm", "role"]


def _test_inputs_module():  # the hand-built sender's side of test_timeline_gaps
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("gap_cases", Path(__file__).with_name("test_timeline_gaps.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _receiver_host() -> receiver_host.ReceiverHost:
    # on its host: runnable on CPU 1 over [0, 1500) (a sieve runs there until 1300, then the CPU
    # idles: a wake-up), asleep over [1500, 1600), running from 1600
    states = pd.DataFrame([(RX, 0, 1_500, "runnable", 1), (RX, 1_500, 1_600, "sleeping", 1),
                           (RX, 1_600, 20_000, "running", 1)], columns=STATES)
    running = pd.DataFrame([(1, 0, 1_300, SIEVE, "hw-bench", "receiver_background"),
                            (1, 1_300, 1_550, 0, "swapper/1", "idle"),
                            (1, 1_550, 1_600, OTHER, "kworker", "other"),
                            (1, 1_600, 20_000, RX, "hw-bench", "receiver"),
                            (0, 0, 20_000, OTHER, "busy", "other")], columns=RUNNING)
    return receiver_host.from_tables(states, running, {"s:1>r:2": RX})


def test_receiver_window_split_by_the_receivers_host() -> None:
    """receiver_window over [1200, 1400) (the window) and [500, 1000), [1500, 1600), [1800, 1900)
    (late acknowledgements where nothing of the sender's host holds the bytes): preempted by the
    sieve over [500, 1000) and [1200, 1300), 600 ns; asleep over [1500, 1600), 100 ns; runnable
    on an idle CPU over [1300, 1400) and running over [1800, 1900), 200 ns not reading."""
    cases = _test_inputs_module()
    late = pd.DataFrame({"stream": [cases.S], "t_start_ns": [500], "t_end_ns": [1_900]})
    table, _ = gaps.explain(cases._inputs(late_acks=late, receiver_host=_receiver_host()))
    row = table.iloc[0]
    assert int(row["receiver_window_ns"]) == 900
    assert {c: int(row[f"{c}_ns"]) for c in gaps.RECEIVER_PARTS} == {
        "receiver_preempted": 600, "receiver_blocked": 100, "receiver_not_reading": 200}
    # within the gap the receiver waited for its CPU over [0, 1300), all of it behind the sieve
    assert row["receiver_preempted_by"] == f"{SIEVE} hw-bench receiver_background 100.0%"
    assert (table[[f"{c}_ns" for c in gaps.CAUSES]].sum(axis=1) == table["gap_ns"]).all()
    # --summary: the parts' shares of the gap time, adding up to receiver_window's, in the sums
    # kept in memory and in those kept as the gaps come
    sinks = gap_tables.Totals()
    sinks.begin([cases.S], [], {})
    sinks.add(cases.S, table, pd.DataFrame(), pd.DataFrame())
    for summary in (gap_tables.summary(table), sinks.summary()):
        whole = summary[summary["stream"] == "all"].iloc[0]
        gap_ns = int(table["gap_ns"].sum())
        assert {c: whole[f"{c}_share"] for c in gaps.RECEIVER_PARTS} == {
            "receiver_preempted": 600 / gap_ns, "receiver_blocked": 100 / gap_ns, "receiver_not_reading": 200 / gap_ns}
        assert whole["receiver_window_share"] == 900 / gap_ns


def test_without_the_receivers_host_the_split_is_zero() -> None:
    table, _ = gaps.explain(_test_inputs_module()._inputs())
    assert (table[[f"{c}_ns" for c in gaps.RECEIVER_PARTS]] == 0).all().all()
    assert (table["receiver_preempted_by"] == "").all()


def test_the_receivers_trace_check_is_that_its_pair_stayed_put() -> None:
    """A host's trace clock 2000 s behind its user-space clock (a time namespace) passes when the
    difference moved by at most 10 us between the trace's start and stop; a pair missing is unknown."""
    from hostwire.record.hosts_runner import pair_steady

    def meta(start: int, stop: int | None) -> dict:
        return {"clock_check": {"start": {"diff_ns": start}, "stop": None if stop is None else {"diff_ns": stop}}}

    assert pair_steady(meta(-2_000_000_000_000, -2_000_000_009_999)) is True
    assert pair_steady(meta(-2_000_000_000_000, -2_000_000_010_001)) is False
    assert pair_steady(meta(-2_000_000_000_000, None)) is None


def test_sieves_on_the_receivers_host_need_hosts(tmp_path) -> None:
    """receiver_background without [hosts] is one line naming the file, its line and the key;
    with [hosts] it is read."""
    import pytest

    from hostwire.campaign.config import load_config
    from hostwire.errors import UsageError

    path = tmp_path / "c.toml"
    path.write_text('[campaign]\nname = "h"\n[defaults]\nreceiver_background = 2\n')
    with pytest.raises(UsageError) as err:
        load_config(path)
    assert "c.toml:4: defaults.receiver_background: background processes on the receiver's host need [hosts]" \
        in str(err.value) and "\n" not in str(err.value)
    path.write_text('[campaign]\nname = "h"\n[defaults]\nreceiver_background = 2\n[hosts]\nsender = "pc1"\n'
                    'receiver = "pc2"\n')
    assert [p.receiver_background for p in load_config(path).points()] == [2]
