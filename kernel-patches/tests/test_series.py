"""The schedtrace series against the Debian source package it names: it applies, and the files it
adds or changes compile in the guest config (scripts/kernel.sh check). A broken patch and a
missing source package each end in one line."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KERNEL_SH = REPO / "scripts" / "kernel.sh"
PATCHES = REPO / "kernel-patches"

pytestmark = [pytest.mark.privileged, pytest.mark.slow]


def kernel_sh(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(KERNEL_SH), *args], capture_output=True, text=True, timeout=1800,
                          env={**os.environ, **env})


def series_names() -> list[str]:
    lines = (PATCHES / "series").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def test_series_names_an_exact_source_version() -> None:
    header = (PATCHES / "series").read_text().splitlines()[1]
    assert header.startswith("# source: linux-source-6.12 6.12.")
    for name in series_names():
        text = (PATCHES / name).read_text()
        assert text.startswith("From: ") and "\nSubject: [PATCH] " in text and "\n+++ b/" in text


@pytest.mark.long  # compiles the patched kernel files: a minute of both CPUs beside other tests
def test_series_applies_and_compiles() -> None:
    result = kernel_sh("check")
    assert result.returncode == 0, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("hostwire kernel: the series applies to linux-source-6.12 ")
    for obj in ("kernel/sched/core.o", "kernel/sched/schedtrace.o", "kernel/sched/schedtrace_sys.o"):
        assert obj in last


def test_broken_patch_is_one_line(tmp_path: Path) -> None:
    patches = tmp_path / "patches"
    shutil.copytree(PATCHES, patches, ignore=shutil.ignore_patterns("tests"))
    first = patches / series_names()[0]
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
