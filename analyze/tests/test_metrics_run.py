"""`hostwire metrics` on a real run directory: a short loopback run of hw-bench, checked against the
benchmark's own totals (bytes in the window per receiver, write calls per sender)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pandas as pd
import pytest

from hostwire.cli import main


def metrics(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["metrics", *args])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def loopback_run(tmp_path_factory: pytest.TempPathFactory, build_dir: Path) -> Path:
    from hostwire.record.runner import RunPoint, record_run

    root = tmp_path_factory.mktemp("runs")
    point = RunPoint(senders=2, background=1, warmup_s=0.3, duration_s=1.0, quiet_s=0.2, topology="loopback",
                     capture=False, kernel_trace=False)
    record = record_run(root, "r1", point)
    assert record.status == "complete", record.reason
    return record.directory


def test_fairness_and_goodput_match_the_receivers_totals(loopback_run: Path) -> None:
    import hostwire

    summary = hostwire.load_run(loopback_run).bench.summary
    port = summary["receiver_ports"]["tcp"]
    expect = {}
    for sender in (p for p in summary["processes"] if p["kind"] == "send"):
        recv = next(r for r in summary["receivers"] if r["index"] == sender["index"])
        expect[f"127.0.0.1:{sender['local_port']}>127.0.0.1:{port}"] = recv["bytes_window"]
    code, out, err = metrics("fairness", str(loopback_run))
    assert code == 0, err
    table = pd.read_csv(io.StringIO(out)).set_index("stream")
    assert table["bytes"].drop("all").to_dict() == expect
    x = list(expect.values())
    assert table.loc["all", "jain"] == pytest.approx(sum(x) ** 2 / (len(x) * sum(v * v for v in x)))
    code, out, _ = metrics("goodput", str(loopback_run))
    gp = pd.read_csv(io.StringIO(out)).set_index("stream")
    assert gp.loc["all", "seconds"] == pytest.approx(1.0)
    assert gp.loc["all", "bit_s"] == pytest.approx(sum(x) * 8 / 1.0)


def test_write_intervals_and_sanity_of_a_run_without_capture(loopback_run: Path) -> None:
    import hostwire

    summary = hostwire.load_run(loopback_run).bench.summary
    code, out, err = metrics("intervals", str(loopback_run))
    assert code == 0, err
    table = pd.read_csv(io.StringIO(out))
    assert set(table["kind"]) == {"write"} and len(table) == 2
    calls = sorted(p["calls_window"] for p in summary["processes"] if p["kind"] == "send")
    assert all(abs(a - (b + 1)) <= 2 for a, b in zip(calls, sorted(table["count"])))
    code, out, err = metrics("sanity", str(loopback_run), "--check")
    assert code == 0, err
    counters = pd.read_csv(io.StringIO(out)).set_index("counter")["value"]
    assert counters["marked"] == 0 and counters["unclean_exits"] == 0 and counters["log_overflows"] == 0
    assert "loss.bench_log_overflow" in counters.index
    # Kinds that need the wire say so in one line.
    code, out, err = metrics("idc", str(loopback_run))
    assert code == 1 and out == "" and "no wire frames" in err and len(err.strip().splitlines()) == 1


def test_on_a_run_the_logs_name_the_streams_not_the_capture(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's capture also holds the control connection; fairness counts the senders' streams
    only, a starved one with 0."""
    import numpy as np

    from hostwire.metrics import compute, synth
    from hostwire.metrics.inputs import Source
    from hostwire.window import Window

    a = "198.18.0.1:40000>198.18.0.2:5001"
    b = "198.18.0.1:40001>198.18.0.2:5001"
    frames = synth.concat([
        synth.frames(np.arange(1, 4) * 10**6, payload=1000, sport=40000),
        synth.frames(np.array([5 * 10**6]), payload=100, sport=5001, dport=40002, src=synth.RECEIVER,
                     dst=synth.SENDER),  # control connection
    ])
    writes = pd.DataFrame({"t_ns": [10**6, 2 * 10**6, 3 * 10**6, 4 * 10**6], "pid": [1, 1, 1, 2],
                           "role": ["send-0", "send-0", "send-0", "send-1"], "stream": [a, a, a, b],
                           "bytes": [1000, 1000, 1000, 0]})
    received = pd.DataFrame({"t_ns": [2 * 10**6, 4 * 10**6], "bytes": [1000, 2000], "stream": [a, a]})
    source = Source(path=Path("run"), frames=frames, window=Window(0, 10 * 10**6), writes=writes,
                    received=received, manifest={})
    monkeypatch.setattr(compute, "open_input", lambda path, **options: source)
    table = compute.table("fairness", "run").set_index("stream")
    assert table["bytes"].to_dict() == {a: 3000, b: 0, "all": 3000}
    assert (table["n"] == 2).all() and table.loc["all", "jain"] == pytest.approx(0.5)
    only_b = compute.table("goodput", "run", stream=["40001"]).set_index("stream")
    assert only_b["bytes"].to_dict() == {b: 0, "all": 0}
