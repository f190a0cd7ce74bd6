"""hostwire raises its soft limit of open files to the hard one (hostwire.cli): the slab engine's
gaps of the committed fixture run, whose scratch files pass a soft limit of LOW, finish under a
soft limit of LOW with the hard one above, as under no limit; with the hard limit that low too, one line names the
limit, exit 1, no traceback."""

from __future__ import annotations

import resource
import shutil
import subprocess
import sys
from pathlib import Path

from hostwire.paths import REPO_ROOT

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "run-small"
LOW = 28  # below what the slab engine takes on the fixture in slabs of 4 KiB (it needs 29-40; at 12-28 it ends in one line)


def gaps_with_limit(run: Path, soft: int, hard: int) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    return subprocess.run([sys.executable, "-m", "hostwire", "gaps", str(run), "--engine", "slabs"],
                          capture_output=True, text=True, timeout=300, preexec_fn=limit,
                          env={"HOSTWIRE_SLAB_BYTES": "4096", "PATH": "/usr/bin:/bin"})


def test_the_soft_limit_is_raised_and_a_hard_one_too_low_is_one_line(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    raised = gaps_with_limit(run, LOW, hard)
    assert raised.returncode == 0, raised.stderr
    held = gaps_with_limit(run, LOW, LOW)
    assert held.returncode == 1, held.stderr
    assert held.stderr.startswith(f"hostwire: too many open files ({LOW} allowed;"), held.stderr
    assert "Traceback" not in held.stderr and held.stderr.count("\n") == 1, held.stderr
    assert raised.stdout == gaps_with_limit(run, hard, hard).stdout
