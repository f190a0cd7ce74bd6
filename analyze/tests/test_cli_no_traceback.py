"""Issue 22, case 7: inputs that ended in a traceback give one clear line and exit 2 (usage) or 1
(the data): --from nan, --to inf, timeline --text over a window shorter than one event, a run
directory whose name is not UTF-8. Each drives the CLI as a subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hostwire.paths import REPO_ROOT

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "run-small"
RUN = "RUN"  # stands for the module's copy of the fixture (a timeline writes its copies beside it)


@pytest.fixture(scope="module")
def run_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("fixture") / "run-small"
    shutil.copytree(FIXTURE, copy)
    return copy


def hostwire(*args: str | bytes) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "analyze")}
    return subprocess.run([sys.executable, "-m", "hostwire", *args], capture_output=True, text=True,
                          errors="backslashreplace", timeout=120, env=env)


def one_line(proc: subprocess.CompletedProcess[str], code: int, words: str) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    assert proc.returncode == code and len(lines) == 1, (proc.returncode, proc.stderr)
    assert lines[0].startswith("hostwire: ") and words in lines[0], lines[0]


@pytest.mark.parametrize("args", [
    ("metrics", "intervals", str(RUN), "--from", "nan"),
    ("metrics", "idc", str(RUN), "--to", "inf"),
    ("metrics", "goodput", str(RUN), "--from=-inf"),
    ("gaps", str(RUN), "--from", "nan"),
    ("gaps", str(RUN), "--to", "inf"),
    ("timeline", str(RUN), "--text", "-o", "-", "--to", "inf"),
    ("timeline", str(RUN), "--text", "-o", "-", "--from", "1e300"),
])
def test_nan_and_infinite_times_are_usage_errors(args: tuple[str, ...], run_copy: Path) -> None:
    one_line(hostwire(*(str(run_copy) if a == RUN else a for a in args)), 2, "expected a finite number of seconds")


def test_timeline_text_over_a_window_shorter_than_one_event(run_copy: Path) -> None:
    # 100 ns inside a 29 ms slice of the fixture's CPU 0 that began before it: nothing begins there
    proc = hostwire("timeline", str(run_copy), "--text", "-o", "-", "--from", "0.01", "--to", "0.0100001")
    one_line(proc, 1, "no event begins in")


def test_a_run_directory_whose_name_is_not_utf8(tmp_path: Path) -> None:
    campaign = tmp_path / "campaign"
    campaign.mkdir()
    shutil.copytree(FIXTURE, os.fsdecode(bytes(campaign) + b"/run-\xff"))
    one_line(hostwire("analyze", str(campaign)), 1, "run-\\xff: the name is not UTF-8")
