"""The sched_switch_ext series against the Debian source package it names: it is mailable (numbered
v2 subjects, the project's From: and Signed-off-by:, a cover letter), it applies with patch and
with git am, checkpatch.pl --strict finds no error, and the files it adds or changes compile in
the guest config (scripts/kernel.sh check). A broken patch and a missing source package each end
in one line."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KERNEL_SH = REPO / "scripts" / "kernel.sh"
PATCHES = REPO / "kernel-patches"

pytestmark = [pytest.mark.privileged, pytest.mark.slow]

IDENTITY = "Seed bd2da114 maintainers <maintainers@users.noreply.a-seed-bd2da114.example>"


def kernel_sh(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(KERNEL_SH), *args], capture_output=True, text=True, timeout=1800,
                          env={**os.environ, **env})


def series_names() -> list[str]:
    lines = (PATCHES / "series").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def test_series_names_an_exact_source_version_and_is_mailable() -> None:
    header = (PATCHES / "series").read_text().splitlines()[1]
    assert header.startswith("# source: linux-source-6.12 6.12.")
    names = series_names()
    for n, name in enumerate(names, 1):
        text = (PATCHES / name).read_text()
        # git format-patch folds a long From: header onto two lines
        author = re.search(r"^From: (.*(?:\n .*)?)$", text, re.M)
        assert author and " ".join(author[1].split()) == IDENTITY, name
        assert f"\nSubject: [PATCH v2 {n}/{len(names)}] " in text and "\n+++ b/" in text, name
        assert f"\nSigned-off-by: {IDENTITY}\n" in text, name
    cover = (PATCHES / "v2-0000-cover-letter.patch").read_text()
    assert f"\nSubject: [PATCH v2 0/{len(names)}] " in cover and "*** SUBJECT HERE ***" not in cover
    for part in ("Changes since v1", "Alternatives", "Measured"):
        assert part in cover, part


@pytest.mark.long  # compiles the patched kernel files: a minute of both CPUs beside other tests
def test_series_applies_and_compiles() -> None:
    result = kernel_sh("check")
    assert result.returncode == 0, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("hostwire kernel: the series applies to linux-source-6.12 ")
    for obj in ("kernel/sched/core.o", "kernel/sched/build_utility.o"):
        assert obj in lines[-1]
    assert any(line.startswith("hostwire kernel: git am applies the 3 patches: ") for line in lines), lines
    checked = [line for line in lines if line.startswith("hostwire kernel: checkpatch.pl --strict: ")]
    assert checked and re.findall(r"total: (\d+) errors", checked[0]) == ["0", "0", "0"], checked
    # the whole report, into the test log (pytest -rP shows it)
    report = Path(checked[0].rsplit("(report: ", 1)[1].rstrip(")"))
    print(report.read_text())


def test_broken_patch_is_one_line(tmp_path: Path) -> None:
    patches = tmp_path / "patches"
    shutil.copytree(PATCHES, patches, ignore=shutil.ignore_patterns("tests"))
    first = patches / next(name for name in series_names() if "bare-tracepoint" in name)
    text = first.read_text()
    # a context line that the source does not have
    context = " \t\ttrace_sched_switch(preempt, prev, next, prev_state);\n"
    assert context in text
    first.write_text(text.replace(context, " \t\ttrace_sched_switch(preempt, prev, next, 0);\n"))
    result = kernel_sh("check", HOSTWIRE_KERNEL_PATCHES=str(patches), HOSTWIRE_KERNEL_TREE=str(tmp_path / "tree"))
    assert result.returncode == 1
    # the one line of the fault, after the progress line of a source not unpacked yet
    lines = [line for line in result.stderr.strip().splitlines() if not line.startswith("hostwire kernel: unpacking ")]
    assert len(lines) == 1 and f"{first.name} does not apply to linux-source-6.12" in lines[0], result.stderr
    assert not (tmp_path / "tree").exists()


def test_missing_source_package_is_one_line(tmp_path: Path) -> None:
    patches = tmp_path / "patches"
    shutil.copytree(PATCHES, patches, ignore=shutil.ignore_patterns("tests"))
    series = patches / "series"
    lines = series.read_text().splitlines()
    lines[1] = "# source: linux-source-0.0 0.0.1-1 (no such package)"
    series.write_text("\n".join(lines) + "\n")
    result = kernel_sh("check", HOSTWIRE_KERNEL_PATCHES=str(patches), HOSTWIRE_KERNEL_BUILD=str(tmp_path / "kb"))
    assert result.returncode == 1
    out = result.stderr.strip().splitlines()
    assert len(out) == 1, result.stderr
    assert out[0].startswith("hostwire kernel: linux-source-0.0 0.0.1-1 cannot be installed (E: ")
