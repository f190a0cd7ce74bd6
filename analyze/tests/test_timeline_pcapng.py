"""hostwire timeline --pcapng: the run's capture as pcapng, each data frame commented with its
owner, read back by tshark (a peer tool), stamps unchanged to the nanosecond."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import hostwire
from hostwire.paths import REPO_ROOT
from hostwire.timeline.build import Timeline

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "run-small"


def tshark_fields(path: Path, *fields: str) -> list[list[str]]:
    proc = subprocess.run(["tshark", "-r", str(path), "-T", "fields", *[a for f in fields for a in ("-e", f)]],
                          capture_output=True, text=True, check=True)
    return [line.split("\t") for line in proc.stdout.splitlines()]


def test_every_data_frame_names_its_sending_process(tmp_path: Path, build_dir: Path) -> None:
    if shutil.which("tshark") is None:
        pytest.fail("tshark is not installed (make setup)", pytrace=False)
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE, run_dir)
    out = tmp_path / "owned.pcapng"
    proc = subprocess.run([sys.executable, "-m", "hostwire", "timeline", str(run_dir), "--pcapng", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    run = hostwire.load_run(run_dir)
    sender = Timeline.of(run).df_streams().iloc[0]
    rows = tshark_fields(out, "frame.number", "frame.time_epoch", "tcp.srcport", "tcp.len", "frame.comment")
    original = tshark_fields(run_dir / "raw" / "wire.pcap", "frame.number", "frame.time_epoch")
    assert [r[:2] for r in rows] == original  # every frame, every stamp to the nanosecond
    data = [r for r in rows if r[2] == str(sender["sport"]) and r[3] not in ("", "0")]
    assert len(data) > 300
    expected = f"hostwire: stream {sender['stream']} sender pid {int(sender['sender_pid'])} ({sender['sender_role']})"
    assert all(r[4].startswith(expected) for r in data), [r for r in data if not r[4].startswith(expected)][:3]
    acks = [r for r in rows if r[3] == "0"]
    assert acks and all(r[4] == "" for r in acks)  # frames without payload carry no comment
    assert proc.stderr.strip() == f"hostwire: {out}: {len([r for r in rows if r[4]])} data frames commented"
