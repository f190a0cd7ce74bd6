"""`hostwire metrics KIND INPUT` as a user runs it: CSV/JSON out, one-line errors, exit codes."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hostwire.metrics import synth

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this file (importlib mode)
from integrity_helpers import metrics  # noqa: E402

S = 10**9
KINDS = ["intervals", "bursts", "idc", "hurst", "contract", "fairness", "goodput", "sanity"]


def hostwire(*args: str) -> subprocess.CompletedProcess[str]:
    """The command in this process (fast); an escaping exception fails the test like a traceback."""
    code, out, err = metrics(*args)
    return subprocess.CompletedProcess(args, code, out, err)


def hostwire_process(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    return subprocess.run([sys.executable, "-m", "hostwire", "metrics", *args], capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(2)
    a = synth.frames(synth.poisson(rng, 300.0, 4 * S), payload=1448)
    b = synth.frames(np.sort(rng.choice(synth.constant_rate(2_000_000, 4 * S), 800, replace=False)),
                     payload=1000, sport=40001)
    syn = synth.frame_table(np.array([10]), np.array([0]), np.array([1]), np.array([0]), synth.SENDER,
                            synth.RECEIVER, 40002, 5001, flags=0x02)
    path = tmp_path_factory.mktemp("cap") / "frames.parquet"
    synth.concat([a, b, syn]).to_parquet(path)
    return path


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_writes_a_table_without_nan(kind: str, capture: Path) -> None:
    proc = hostwire(kind, str(capture))
    assert proc.returncode == 0, proc.stderr
    table = pd.read_csv(io.StringIO(proc.stdout))
    assert len(table) >= 1
    if kind in ("intervals", "idc", "hurst", "contract", "fairness", "goodput"):
        assert not table.isna().any().any(), table
        assert "all" in set(table["stream"])
    proc = hostwire(kind, str(capture), "--json")
    assert proc.returncode == 0 and len(json.loads(proc.stdout)) == len(table)


def test_fairness_counts_the_starved_stream(capture: Path) -> None:
    table = pd.read_csv(io.StringIO(hostwire("fairness", str(capture)).stdout)).set_index("stream")
    assert table.loc["198.18.0.1:40002>198.18.0.2:5001", "bytes"] == 0
    assert table["n"].iloc[0] == 3 and 0.33 < table.loc["all", "jain"] < 0.67


def test_window_and_stream_options(capture: Path) -> None:
    proc = hostwire("goodput", str(capture), "--from", "1", "--to", "3", "--stream", "40001")
    table = pd.read_csv(io.StringIO(proc.stdout)).set_index("stream")
    assert list(table.index) == ["198.18.0.1:40001>198.18.0.2:5001", "all"]
    assert table.loc["all", "seconds"] == pytest.approx(2.0)
    idc = pd.read_csv(io.StringIO(hostwire("idc", str(capture), "--points", "5", "--bytes").stdout))
    assert idc.groupby("stream").size().max() == 5 and list(idc.columns) == ["stream", "t_ns", "bins", "mean",
                                                                               "var", "idc"]


def test_contract_options(capture: Path) -> None:
    proc = hostwire("contract", str(capture), "--stream", "40000", "--points", "20")
    curve = pd.read_csv(io.StringIO(proc.stdout))
    assert list(curve.columns) == ["stream", "scr_cells_s", "t_s_ns", "tau_min_ns", "mbs_min"]
    assert curve["scr_cells_s"].max() == pytest.approx(10**7 / 424) and curve["mbs_min"].min() == 1
    proc = hostwire("contract", str(capture), "--mbs", "40")
    rows = pd.read_csv(io.StringIO(proc.stdout))
    assert proc.returncode == 0 and (rows["mbs"] == 40).all() and len(rows) == 2
    proc = hostwire("contract", str(capture), "--cells-from", "write")
    assert proc.returncode == 1 and "needs the senders' writes" in proc.stderr


def one_line_error(proc: subprocess.CompletedProcess[str], code: int, words: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hostwire: ") and words in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("kind", KINDS)
def test_empty_window_one_frame_and_no_tcp_are_one_line_errors(kind: str, tmp_path: Path) -> None:
    one = tmp_path / "one.parquet"
    synth.frames(np.array([1000])).to_parquet(one)
    udp = tmp_path / "udp.parquet"
    synth.frames(np.arange(0, 5 * S, 10**6)).assign(proto=np.uint8(17)).to_parquet(udp)
    empty = tmp_path / "empty.parquet"
    synth.frames(np.zeros(0, np.int64)).to_parquet(empty)
    if kind == "sanity":  # a capture without TCP still has its counters; an empty one has none
        assert hostwire(kind, str(udp)).returncode == 0
        one_line_error(hostwire(kind, str(empty)), 1, "no frames")
        return
    one_line_error(hostwire(kind, str(udp)), 1, "no TCP frames")
    one_line_error(hostwire(kind, str(empty)), 1, "no frames")
    if kind not in ("fairness", "goodput"):  # one frame has bytes, but no interval, burst or bin
        one_line_error(hostwire(kind, str(one)), 1, "1")


def test_usage_errors_exit_2(capture: Path) -> None:
    one_line_error(hostwire("goodput", str(capture), "--from", "3", "--to", "1"), 2, "empty window")
    one_line_error(hostwire("bursts", str(capture), "--theta", "soon"), 2, "duration")
    one_line_error(hostwire("nosuch", str(capture)), 2, "invalid choice")
    one_line_error(hostwire("idc", "/nonexistent/x.pcap"), 1, "no such file")


def test_as_a_process(capture: Path, tmp_path: Path) -> None:
    proc = hostwire_process("goodput", str(capture))
    assert proc.returncode == 0 and proc.stdout.startswith("stream,bytes,seconds,bit_s\n")
    empty = tmp_path / "empty.parquet"
    synth.frames(np.zeros(0, np.int64)).to_parquet(empty)
    one_line_error(hostwire_process("idc", str(empty)), 1, "no frames")


def test_library_callers_get_the_same_table(capture: Path) -> None:
    from hostwire.errors import UsageError
    from hostwire.metrics.compute import table

    cli = pd.read_csv(io.StringIO(hostwire("bursts", str(capture), "--theta", "5ms").stdout))
    lib = table("bursts", capture, theta=5_000_000)
    pd.testing.assert_frame_equal(cli, pd.read_csv(io.StringIO(lib.to_csv(index=False, float_format="%.10g"))))
    with pytest.raises(UsageError, match="no option"):
        table("idc", capture, nonsense=1)
