"""Caches that trust only digests (issue: a deleted source, cached numbers; a damaged cache): a
run's metrics.json and tables are served only while every raw file has the sha256 they were made
from and the one its runner recorded; a cache that does not read back is recomputed, named."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import pytest

from hostwire.campaign.analyze import analyze_campaign, analyze_run
from hostwire.paths import REPO_ROOT

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "run-small"


@pytest.fixture
def campaign(tmp_path: Path) -> Path:
    out = tmp_path / "campaign"
    shutil.copytree(FIXTURE, out / "run-small")
    return out


def test_a_deleted_source_is_not_served_from_the_cache_and_marks_the_run(campaign: Path) -> None:
    run = campaign / "run-small"
    first = analyze_run(run)
    assert first["marked"] == 0 and first["idc_100ms"] > 0
    (run / "raw" / "wire.pcap").unlink()
    for force in (False, True):
        row = analyze_run(run, force=force)
        assert row["marked"] == 1, row
        assert "raw/wire.pcap: missing" in row["errors"]
        assert "idc_100ms" not in row  # not the cached number
    summary = analyze_campaign(campaign, workers=1)
    assert int(summary["marked"].iloc[0]) == 1


def test_a_source_changed_under_the_same_size_and_mtime_is_found(campaign: Path) -> None:
    run = campaign / "run-small"
    analyze_run(run)
    sched = run / "raw" / "sched.tsv"
    before = sched.stat()
    data = bytearray(sched.read_bytes())
    data[-2] ^= 0x01  # one bit of the last line, same size
    sched.write_bytes(bytes(data))
    os.utime(sched, ns=(before.st_atime_ns, before.st_mtime_ns))
    row = analyze_run(run)
    assert row["marked"] == 1 and "raw/sched.tsv: content differs" in row["errors"]


@pytest.mark.parametrize("damage", ["empty-idc", "corrupt-metrics", "flipped-idc"])
def test_a_damaged_cache_is_recomputed_with_a_line(campaign: Path, damage: str,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    run = campaign / "run-small"
    first = analyze_run(run)
    named = run / "tables" / "idc.parquet"
    if damage == "empty-idc":
        named.write_bytes(b"")
    elif damage == "flipped-idc":
        data = bytearray(named.read_bytes())
        data[len(data) // 2] ^= 0x10
        named.write_bytes(bytes(data))
    else:
        named = run / "metrics.json"
        named.write_text(named.read_text()[:100])
    with caplog.at_level(logging.WARNING):
        row = analyze_run(run)
    assert row["idc_100ms"] == first["idc_100ms"] and row["marked"] == 0
    assert any(str(named) in r.getMessage() and "recomputed" in r.getMessage() for r in caplog.records)
    assert json.loads((run / "metrics.json").read_text())["row"]["idc_100ms"] == first["idc_100ms"]
    assert (run / "tables" / "idc.parquet").stat().st_size > 0


def test_report_recomputes_an_empty_table_instead_of_a_traceback(campaign: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    from hostwire.report.campaign_report import build_report

    analyze_campaign(campaign, workers=1)
    table = campaign / "run-small" / "tables" / "idc.parquet"
    table.write_bytes(b"")
    with caplog.at_level(logging.WARNING):
        assert build_report(campaign).exists()
    assert any(str(table) in r.getMessage() for r in caplog.records)
