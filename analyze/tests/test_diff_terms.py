"""hostwire diff's split of a goodput change (hostwire.diff.terms), its noise marks
(hostwire.diff.noise) and the senders' run intervals and softirqs it reads from the kernel
trace (hostwire.diff.run_facts), on cases computed by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hostwire.diff import noise
from hostwire.diff.run_facts import softirqs, task_runs
from hostwire.timeline.intervals import overlap_ns
from hostwire.diff.terms import Facts, decompose, goodput

SECOND = 1e9


def facts(nbytes: float, streams: int = 1, window: float = SECOND, cpu: dict[str, float] | None = None,
          **time: float) -> Facts:
    parts = {"outside": 0.0, "sending": 0.0, "app-idle": 0.0, "preempted": 0.0}
    parts.update({k.replace("_", "-"): v for k, v in time.items()})
    assert sum(parts.values()) == pytest.approx(streams * window)  # the identity each run holds to
    return Facts(window_ns=window, bytes=nbytes, streams=streams, time_ns=parts, cpu_ns=cpu)


def by_name(terms: list) -> dict[str, float]:
    return {t.term: t.delta_bit_s for t in terms}


def test_a_change_splits_into_the_hand_computed_terms() -> None:
    """A: 1 MB in 1 s (8 Mbit/s), 1000 ns of stream-time per byte: 100 outside, 500 sending, 400
    app-idle. B: half the bytes (4 Mbit/s), 2000 ns per byte: 200, 500, 1300. The terms,
    -4e9 (n_A + n_B) dtau_k / (tau_A tau_B): outside -4e9 * 2 * 100 / 2e6 = -0.4 Mbit/s, sending 0,
    app-idle -4e9 * 2 * 900 / 2e6 = -3.6 Mbit/s; they add up to -4 Mbit/s."""
    a = facts(1e6, outside=0.1e9, sending=0.5e9, app_idle=0.4e9)
    b = facts(5e5, outside=0.1e9, sending=0.25e9, app_idle=0.65e9)
    terms = decompose([a], [b])
    d = by_name(terms)
    assert goodput([a]) == 8e6 and goodput([b]) == 4e6
    assert d["outside"] == pytest.approx(-0.4e6) and d["app-idle"] == pytest.approx(-3.6e6)
    assert d["sending"] == pytest.approx(0) and d["streams"] == 0 and d["preempted"] == 0
    assert sum(d.values()) == pytest.approx(-4e6, rel=1e-12)
    assert {t.term: t.share for t in terms}["app-idle"] == pytest.approx(0.9)
    assert all(t.noise is None for t in terms)  # one run a side: nothing to tell noise by


def test_twice_the_streams_alike_is_the_streams_term_alone() -> None:
    a = facts(1e6, sending=SECOND)
    b = facts(2e6, streams=2, sending=2 * SECOND)
    d = by_name(decompose([a], [b]))
    assert d["streams"] == pytest.approx(8e6) and d["sending"] == pytest.approx(0)


def test_the_sides_are_symmetric() -> None:
    """A against B is B against A with every term's sign turned."""
    a = facts(1e6, outside=0.2e9, sending=0.5e9, preempted=0.3e9)
    b = facts(7e5, streams=2, outside=0.3e9, sending=1.2e9, preempted=0.5e9)
    ab, ba = by_name(decompose([a], [b])), by_name(decompose([b], [a]))
    assert all(ab[k] == pytest.approx(-ba[k]) for k in ab)
    assert sum(ab.values()) == pytest.approx(goodput([b]) - goodput([a]), rel=1e-12)


def test_repetitions_pool_to_their_mean_goodput() -> None:
    reps = [facts(n, sending=0.6e9, app_idle=0.4e9) for n in (1e6, 1.2e6, 0.9e6)]
    assert goodput(reps) == pytest.approx(np.mean([goodput([r]) for r in reps]))
    other = [facts(n, sending=0.5e9, app_idle=0.5e9) for n in (0.8e6, 0.7e6)]
    assert sum(by_name(decompose(reps, other)).values()) == pytest.approx(goodput(other) - goodput(reps), rel=1e-12)


def test_cpu_terms_add_up_and_name_the_granted_cpu() -> None:
    """A: 0.5 CPU-s/s for 1 MB/s (500 ns/B: 300 user, 150 calls, 50 softirq); B: half the CPU,
    the same cost per byte, so half the goodput: the granted CPU's term is the whole change."""
    a = facts(1e6, sending=SECOND, cpu={"cpu-user": 3e8, "cpu-calls": 1.5e8, "cpu-softirq": 0.5e8})
    b = facts(5e5, sending=SECOND, cpu={"cpu-user": 1.5e8, "cpu-calls": 0.75e8, "cpu-softirq": 0.25e8})
    cpu = {t.term: t.delta_bit_s for t in decompose([a], [b]) if t.group == "cpu"}
    assert cpu["cpu-granted"] == pytest.approx(-4e6)
    assert all(cpu[k] == pytest.approx(0, abs=1e-6) for k in ("cpu-user", "cpu-calls", "cpu-softirq"))


def test_noise_marks_only_what_moved() -> None:
    """Five repetitions a side from one distribution, but for app-idle, which B doubles: only
    app-idle (and sending, which gives it the time) is beyond noise."""
    rng = np.random.default_rng(7)

    def side(idle: float) -> list[Facts]:
        return [_balanced(1e6 * (1 + 0.02 * rng.standard_normal()), idle, rng) for _ in range(5)]

    a, b = side(0.2e9), side(0.4e9)
    terms = decompose(a, b)
    noise.mark(terms, a, b)
    marks = {t.term: t.noise for t in terms}
    assert marks["app-idle"] is False and marks["sending"] is False
    assert marks["outside"] is True and marks["streams"] is True and marks["preempted"] is True
    again = side(0.2e9)
    same = decompose(a, again)
    noise.mark(same, a, again)
    assert all(t.noise for t in same)


def _balanced(n: float, idle: float, rng: np.random.Generator) -> Facts:
    outside = 0.1e9 * (1 + 0.05 * rng.standard_normal())
    return facts(n, outside=outside, app_idle=idle, sending=SECOND - idle - outside)


def test_welch_p_agrees_with_the_textbook_formula() -> None:
    """t = (mean_b - mean_a) / sqrt(s_a^2/n_a + s_b^2/n_b) with Welch-Satterthwaite's degrees of
    freedom, for a = 1..5, b = 3..7 (t = 2/sqrt(1) = 2, df = 8): two-sided p = 0.0805."""
    p = noise.p_value(np.arange(1.0, 6.0), np.arange(3.0, 8.0))
    assert p == pytest.approx(0.0805, abs=1e-4)
    assert noise.p_value(np.ones(3), np.ones(4)) == 1.0 and noise.p_value(np.ones(3), np.full(3, 2.0)) == 0.0


def sched(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["t_ns", "cpu", "event", "pid", "prev_pid", "next_pid"])


def test_a_task_runs_from_the_switch_to_it_or_from_its_first_own_event() -> None:
    """Task 7 on CPU 0: switched to at 10, away at 30; then the trace has no switch to it out of
    idle (the one before, at 40, goes to idle), its own event at 55 and the switch away at 60; on
    CPU 1 switched to at 70 and still running at the CPU's last event, 90."""
    s = sched([(10, 0, "sched_switch", 0, 0, 7), (20, 0, "net_dev_queue", 7, None, None),
               (30, 0, "sched_switch", 7, 7, 0), (40, 0, "sched_switch", 0, 3, 0),
               (55, 0, "net_dev_queue", 7, None, None), (60, 0, "sched_switch", 7, 7, 0),
               (70, 1, "sched_switch", 0, 0, 7), (90, 1, "net_dev_queue", 7, None, None)])
    r = task_runs(s, {7}).sort_values("t_start_ns")
    assert list(zip(r["t_start_ns"], r["t_end_ns"])) == [(10, 30), (55, 60), (70, 90)]


def test_softirqs_pair_each_entry_with_its_exit_on_its_cpu() -> None:
    s = sched([(1, 0, "softirq_entry", 7, None, None), (2, 1, "softirq_entry", 0, None, None),
               (4, 0, "softirq_exit", 7, None, None), (5, 1, "softirq_exit", 0, None, None),
               (8, 0, "softirq_entry", 7, None, None), (9, 0, "softirq_entry", 3, None, None),
               (12, 0, "softirq_exit", 3, None, None)])  # the exit at 8's was lost: 8 is left out
    got = softirqs(s).sort_values(["cpu", "t_start_ns"])
    assert list(zip(got["cpu"], got["t_start_ns"], got["t_end_ns"], got["pid"])) == [(0, 1, 4, 7), (0, 9, 12, 3),
                                                                                      (1, 2, 5, 0)]


def test_overlap_of_two_interval_sets() -> None:
    a = (np.array([0, 10, 20]), np.array([5, 15, 30]))
    b = (np.array([3, 12]), np.array([11, 25]))
    assert overlap_ns(a, b) == 2 + 1 + 3 + 5  # [3, 5), [10, 11), [12, 15), [20, 25)


def test_a_side_without_traced_calls_makes_both_sides_split_cpu_as_task_and_softirq() -> None:
    from hostwire.diff.compare import coarse_cpu

    traced = Facts(window_ns=1e9, bytes=1e6, streams=1, time_ns={"sending": 1e9},
                   cpu_ns={"cpu-user": 10.0, "cpu-calls": 30.0, "cpu-softirq": 5.0})
    untraced = Facts(window_ns=1e9, bytes=1e6, streams=1, time_ns={"sending": 1e9},
                     cpu_ns={"cpu-task": 50.0, "cpu-softirq": 7.0})
    coarse_cpu([traced, untraced])
    assert traced.cpu_ns == {"cpu-task": 40.0, "cpu-softirq": 5.0}
    assert untraced.cpu_ns == {"cpu-task": 50.0, "cpu-softirq": 7.0}
    both = Facts(window_ns=1e9, bytes=1e6, streams=1, time_ns={"sending": 1e9},
                 cpu_ns={"cpu-user": 1.0, "cpu-calls": 2.0, "cpu-softirq": 3.0})
    coarse_cpu([both])
    assert both.cpu_ns == {"cpu-user": 1.0, "cpu-calls": 2.0, "cpu-softirq": 3.0}  # nothing to join


def test_a_point_recorded_before_a_parameter_existed_matches_it_at_its_default() -> None:
    from hostwire.diff.compare import point_identity

    old = {"senders": 5, "background": 2, "sender_cpu_share": 0.05}
    assert point_identity(old) == point_identity({**old, "sender_rps": False})
    assert point_identity(old) != point_identity({**old, "sender_rps": True})
    assert point_identity(old) != point_identity({**old, "background": 3})


def test_the_change_of_goodput_is_tested_on_its_own() -> None:
    """Goodputs 1, 2, 3 against 4, 5, 6 Mbit/s: t = 3 / sqrt(1/3 + 1/3) = 3.674 on 4 degrees of
    freedom, two-sided p = 0.0213 (a t table); one run on a side gives no p."""
    def side(mbps: list[float]) -> list[Facts]:
        return [Facts(window_ns=1e9, bytes=m * 1e6 / 8, streams=1, time_ns={"sending": 1e9}) for m in mbps]

    assert noise.goodput_p(side([1, 2, 3]), side([4, 5, 6])) == pytest.approx(0.0213, abs=2e-4)
    assert noise.goodput_p(side([1]), side([4, 5, 6])) is None


def test_a_campaign_point_is_named_by_what_sets_it_apart() -> None:
    from dataclasses import asdict

    from hostwire.diff.render import point_label
    from hostwire.record.point import RunPoint

    point = {**asdict(RunPoint()), "senders": 20, "background": 10, "sender_cpu_share": 0.05, "link_qdisc": "none"}
    assert point_label(point) == {"senders": 20, "background": 10, "link_qdisc": "none", "sender_cpu_share": 0.05}
