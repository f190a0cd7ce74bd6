"""Sockets by their lifetimes, recorded for real: seeded random scripts of open, socket, connect,
accept, dup (fcntl F_DUPFD), dup2, close, fork and exec (with and without close-on-exec) on reused
fd numbers, writes in between, each compiled into a small C program (tests/lifetime_program.py)
and recorded by `hostwire record` with each tracer between two namespaces the test creates; every
write is joined to the socket the brute-force replay of its script says its fd held then, or to
none when that was a file."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

from hostwire.record.link import LinkSpec
from hostwire.record.topology import Topology
from hostwire.run_directory import load_run
from hostwire.timeline.build import Timeline

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this file (importlib mode)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analyze" / "tests"))
from lifetime_program import build  # noqa: E402
from lifetime_scripts import make_script  # noqa: E402
from record_helpers import SERVER, record, server, stop  # noqa: E402

pytestmark = [pytest.mark.privileged("netns", "tracefs", "ptrace"), pytest.mark.timeout(600), pytest.mark.long]

PROGRAMS = Path(__file__).resolve().parent / "programs"
SEEDS = (11, 12, 13, 14)


def recorded_calls(runs: list[str], run_id: str, port: int, backend: str, tmp_path: Path) -> pd.DataFrame:
    """The compiled scripts (their command lines, each connecting to `port`) run one after the
    other under `hostwire record --syscalls backend` against a sink server; their recorded calls."""
    with Topology(run_id=run_id, link=LinkSpec(rate="100mbit")) as topo:
        sink = server(topo.rx_ns, ["python3", str(PROGRAMS / "sink_server.py"), SERVER, str(port), "0"])
        try:
            r = record(topo.tx_ns, tmp_path / "run", ["sh", "-c", " && ".join(runs)], "--syscalls", backend)
        finally:
            stop(sink)
    assert r.returncode == 0, r.stderr
    return Timeline.of(load_run(tmp_path / "run")).df_calls()


@pytest.mark.parametrize("backend", ["tracefs", "ptrace", "preload"])
def test_recorded_writes_join_the_socket_their_fd_held(tmp_path: Path, backend: str) -> None:
    scripts = {seed: make_script(seed, steps=40, first_size=100 + 1000 * k) for k, seed in enumerate(SEEDS)}
    runs = []
    for seed, script in scripts.items():
        exe = build(script, tmp_path, f"script{seed}")
        runs.append(f"{exe} {SERVER} 7003 {tmp_path}/sockets{seed}.log 0")
    calls = recorded_calls(runs, "lfr", 7003, backend, tmp_path)
    writes = calls[calls["call"] == "write"]
    checked = 0
    for seed, script in scripts.items():
        names = dict(line.split(" ", 1) for line in (tmp_path / f"sockets{seed}.log").read_text().splitlines())
        for step in (s for s in script.steps if s.op == "write"):
            (row,) = writes[(writes["bytes"] == step.size) & (writes["fd"] == step.fd)].itertuples()
            expected = "" if step.expect == -1 else names[str(step.expect)]
            assert row.stream == expected, (seed, step, row)
            checked += 1
    assert checked == sum(s.op == "write" for sc in scripts.values() for s in sc.steps) == 190


LATER_SEEDS = (21, 24, 26, 31)  # 60 steps each: 325 writes, 121 of them on passed descriptors, 25 receptions


@pytest.mark.parametrize("backend", ["tracefs", "ptrace", "preload"])
def test_close_on_exec_set_later_and_passed_descriptors_recorded(tmp_path: Path, backend: str) -> None:
    """The scripts with close-on-exec set and cleared later (fcntl F_SETFD, ioctl FIOCLEX and
    FIONCLEX) and descriptors passed between the script's processes over a unix socket
    (SCM_RIGHTS), recorded for real. ptrace and preload record each received descriptor: every
    write joins the socket its fd held. tracefs cannot read the message: a write on a passed
    descriptor joins its socket when a socket sample saw it (these scripts run in a few ms, the
    sampler reads every 50 ms: mostly none) and no stream otherwise, never another socket; every
    other write joins exactly."""
    scripts = {seed: make_script(seed, steps=60, first_size=100 + 1000 * k, later=True)
               for k, seed in enumerate(LATER_SEEDS)}
    runs = [f"{build(script, tmp_path, f'later{seed}')} {SERVER} 7005 {tmp_path}/sockets{seed}.log 0"
            for seed, script in scripts.items()]
    calls = recorded_calls(runs, "lfp", 7005, backend, tmp_path)
    writes = calls[calls["call"] == "write"]
    checked = passed_unjoined = 0
    for seed, script in scripts.items():
        names = dict(line.split(" ", 1) for line in (tmp_path / f"sockets{seed}.log").read_text().splitlines())
        for step in (s for s in script.steps if s.op == "write"):
            (row,) = writes[(writes["bytes"] == step.size) & (writes["fd"] == step.fd)].itertuples()
            expected = "" if step.expect == -1 else names[str(step.expect)]
            if backend == "tracefs" and step.passed and row.stream == "":
                passed_unjoined += 1
            else:
                assert row.stream == expected, (seed, step, row)
            checked += 1
    received = calls[calls["call"] == "scm_rights"]
    assert len(received) == (0 if backend == "tracefs" else 25)
    assert set(calls.loc[calls["call"].isin(["fcntl_setfd", "ioctl"]), "pid"]) <= set(calls["pid"])
    marks = sum(s.op in ("setfd", "fioclex") for sc in scripts.values() for s in sc.steps)
    assert (calls["call"].isin(["fcntl_setfd", "ioctl"]) & (calls["fd"] < 16)).sum() == marks
    assert checked == 325
    assert passed_unjoined <= (121 if backend == "tracefs" else 0)
