"""A benchmark log whose column line was damaged is named, never read by the wrong names."""

from __future__ import annotations

from pathlib import Path

import pytest

from hostwire.read.bench import BenchResult
from hostwire.errors import InputError

GOOD = "# format: hostwire-tsv 2\n# kind: bench-send\n# role: send-0\nt_ns\tevent\tbytes\n1\tread_start\t0\n# end: records=1 bytes=0\n"


def result(tmp_path: Path, text: str) -> BenchResult:
    (tmp_path / "send-0.tsv").write_text(text)
    return BenchResult(directory=tmp_path, returncode=0, stderr="")


def test_intact_columns_read(tmp_path: Path) -> None:
    assert list(result(tmp_path, GOOD).log("send-0").df.columns) == ["t_ns", "event", "bytes"]


@pytest.mark.parametrize("keep_damaged", [False, True])
def test_a_flipped_bit_in_the_column_line_is_named(tmp_path: Path, keep_damaged: bool) -> None:
    bench = result(tmp_path, GOOD.replace("\tbytes\n", "\tbytms\n"))  # what one flipped bit does
    with pytest.raises(InputError, match=r"send-0.tsv:4: columns 't_ns event bytms', expected 't_ns event bytes'"):
        bench.log("send-0", keep_damaged=keep_damaged)
