"""What the tests of hw-schedtrace share: the tool, its tracefs instances (each test's own, none left
behind), and running or starting it under a timeout."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest



TIMEOUT = 60
TRACEFS = Path("/sys/kernel/tracing")


def tool(build_dir: Path) -> str:
    return str(build_dir / "bin" / "hw-schedtrace")


def instances() -> set[str]:
    return {p.name for p in (TRACEFS / "instances").glob("hw-*")} if TRACEFS.is_dir() else set()


# Other programs on this machine may have hw-* instances of their own: this file only ever looks
# at (and removes) instances carrying its tag, which every collector started here gets via -n.
TAG = f"pt{os.getpid()}"


def tagged() -> set[str]:
    return {n for n in instances() if re.fullmatch(rf"hw-\d+-{TAG}(-sys)?", n)}


_started: list[subprocess.Popen] = []


@pytest.fixture
def no_leftover() -> Iterator[None]:
    yield
    while _started:  # a failed test may leave its collector running: stop it (ours only, by pid)
        proc = _started.pop()
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.communicate(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
    left = tagged()
    for name in left:  # clean up, then fail: a test must not leave instances behind
        try:
            (TRACEFS / "instances" / name).rmdir()
        except OSError:
            pass
    assert not left, f"tracefs instances left behind: {sorted(left)}"


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, **kw)


def start_collector(cmd: list[str]) -> subprocess.Popen:
    """Starts hw-schedtrace and returns once it reports that it records."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _started.append(proc)
    line = proc.stderr.readline()
    if "recording" not in line:
        proc.kill()
        out, err = proc.communicate(timeout=TIMEOUT)
        pytest.fail(f"hw-schedtrace did not start: {line}{err}")
    return proc


# ---------------------------------------------------------------- usage (no kernel needed)
