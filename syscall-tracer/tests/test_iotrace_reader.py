"""The reader of syscalls.tsv (hostwire.read.syscalls): types, escapes, unfinished calls, the
bad line named, the bytes sent."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hostwire.errors import InputError
from hostwire.read.syscalls import COLUMNS, read_syscalls, send_calls



HEADER = "# format: hostwire-tsv 1\n# kind: syscalls\n# backend: tracefs\n# clock: CLOCK_MONOTONIC\n" + "\t".join(COLUMNS) + "\n"


def write(tmp_path: Path, body: str, header: str = HEADER) -> Path:
    path = tmp_path / "syscalls.tsv"
    path.write_text(header + body)
    return path


def test_reader_types_escapes_and_unfinished(tmp_path: Path) -> None:
    path = write(tmp_path, "20\t30\t7\t8\twrite\t3\t100\t-11\tfile\t/a\\tb\\\\c\t0\n"
                           "10\t15\t7\t7\tread\t0\t-1\t\tpipe\tpipe:[5]\t1\n")
    df = read_syscalls(tmp_path)
    assert list(df.columns) == [*COLUMNS, "dur_ns"]
    assert df.t_enter_ns.tolist() == [10, 20] and df.dur_ns.tolist() == [5, 10]
    assert df.result.isna().tolist() == [True, False] and int(df.result[1]) == -11
    assert df.unfinished.tolist() == [True, False]
    assert df.fd_desc[1] == "/a\tb\\c"
    assert str(df.t_enter_ns.dtype) == "int64" and str(df.result.dtype) == "Int64"


@pytest.mark.parametrize("body, header, message", [
    ("1\t2\t3\t4\twrite\tx\t5\t5\ttcp\t\t0\n", HEADER, "syscalls.tsv:6: column fd: expected an integer, got 'x'"),
    ("1\t2\t3\t4\twrite\t1\t5\t\ttcp\t\t0\n", HEADER, "syscalls.tsv:6: column result: expected an integer"),
    ("1\t2\t3\t4\twrite\t1\t5\t5\tsocket\t\t0\n", HEADER, "syscalls.tsv:6: column fd_kind: expected tcp|udp"),
    ("1\t2\t3\t4\twrite\t1\t5\t5\ttcp\t\t2\n", HEADER, "column unfinished: expected 0 or 1"),
    ("", HEADER.replace("\tunfinished", ""), "syscalls.tsv:5: expected the columns"),
    ("", HEADER.replace("kind: syscalls", "kind: sched"), "expected '# kind: syscalls'"),
    ("", HEADER.replace("tsv 1", "tsv 3"), "format version 3 is newer"),
])
def test_reader_names_the_bad_line(tmp_path: Path, body: str, header: str, message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)):
        read_syscalls(write(tmp_path, body, header))


def test_send_calls_counts_bytes_sent(tmp_path: Path) -> None:
    path = write(tmp_path, "1\t2\t7\t7\twrite\t3\t100\t60\ttcp\ta>b\t0\n"
                           "3\t4\t7\t7\twrite\t3\t100\t-11\ttcp\ta>b\t0\n"
                           "5\t6\t7\t7\tread\t3\t100\t100\ttcp\ta>b\t0\n"
                           "7\t8\t7\t7\twrite\t1\t9\t9\tfile\t/dev/null\t0\n"
                           "9\t10\t7\t7\tsendmmsg\t3\t70\t2\ttcp\ta>b\t0\n")
    w = send_calls(read_syscalls(path))
    assert w.call.tolist() == ["write", "write", "sendmmsg"] and w.bytes.tolist() == [60, 0, 70]


# ---- the benchmark: both backends at once, against the benchmark's own logs ----
