"""raw/syscalls.tsv read piece by piece, keeping some calls (hostwire.read.syscalls.read_syscalls_of,
what a long run's streams and writes read): the rows the whole file's table gives for those calls,
in its order, whatever the pieces; a damaged file refused with the whole reading's message; and a
Run that hands the kept calls to every reader without holding the others."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hostwire.errors import InputError
from hostwire.read.syscalls import read_syscalls, read_syscalls_of
from hostwire.timeline.stream_tables import SEND_CALLS

HEADER = ("# format: hostwire-tsv 2\n# kind: syscalls\n# backend: ptrace\n# clock: CLOCK_MONOTONIC\n"
          "t_enter_ns\tt_exit_ns\tpid\ttid\tcall\tfd\treq_bytes\tresult\tfd_kind\tfd_desc\tunfinished\n")
CALLS = ("write", "sendto", "read", "recvfrom", "writev", "close", "sendmsg")


def records(n: int, seed: int = 1) -> list[str]:
    """n records of a few processes: sends and other calls, descriptions with escaped tabs, calls
    that never returned, stamps a little out of order (the tracer writes a call when it returns)."""
    rng = np.random.default_rng(seed)
    enter = np.cumsum(rng.integers(1_000, 50_000, n)) + 10**12
    enter[rng.choice(n, n // 20, replace=False)] -= 40_000  # entered before the previous record's call
    out = []
    for k in range(n):
        call = CALLS[int(rng.integers(0, len(CALLS)))]
        unfinished = rng.random() < 0.02
        result = "" if unfinished else str(int(rng.integers(-11, 65_536)))
        desc = "198.18.0.1:4000%d>198.18.0.2:5001" % (k % 3) if call != "close" else "pipe\\tend"
        out.append(f"{enter[k]}\t{enter[k] + int(rng.integers(500, 9_000))}\t{100 + k % 3}\t{100 + k % 3}\t{call}\t"
                   f"{3 + k % 4}\t65536\t{result}\t{'tcp' if k % 5 else 'pipe'}\t{desc}\t{int(unfinished)}\n")
    return out


def write_log(path: Path, lines: list[str], trailer: bool = True) -> Path:
    path.write_text(HEADER + "".join(lines) + (f"# end: records={len(lines)}\n" if trailer else ""))
    return path


def sends_of_the_whole(path: Path) -> pd.DataFrame:
    whole = read_syscalls(path)
    return whole[whole["call"].isin(SEND_CALLS).to_numpy()].reset_index(drop=True)


@pytest.mark.parametrize("piece_bytes", [1_500, 64 << 10, 1 << 30])
def test_the_kept_calls_of_the_pieces_are_the_whole_files(tmp_path: Path, piece_bytes: int) -> None:
    path = write_log(tmp_path / "syscalls.tsv", records(5_000))
    expected = sends_of_the_whole(path)
    assert 2_000 < len(expected) < 5_000 and expected["fd_desc"].str.contains("\t").sum() == 0
    assert expected["result"].isna().any()  # unfinished sends are kept, as whole
    got = read_syscalls_of(path, SEND_CALLS, piece_bytes)
    pd.testing.assert_frame_equal(got, expected)
    assert got.attrs["meta"]["backend"] == "ptrace"


@pytest.mark.parametrize("damage, message", [
    ("value", r"syscalls\.tsv:3006: column pid: expected an integer, got 'x'"),
    ("trailer", r"syscalls\.tsv:5006: no '# end: records=N' trailer"),
    ("count", r"the trailer counts 4999 records, the file holds 5000"),
])
def test_a_damaged_file_is_refused_in_pieces_as_whole(tmp_path: Path, damage: str, message: str) -> None:
    lines = records(5_000)
    if damage == "value":  # a call that is not kept: its value is checked all the same
        fields = lines[3_000].split("\t")
        fields[2], fields[4] = "x", "read"
        lines[3_000] = "\t".join(fields)
    path = write_log(tmp_path / "syscalls.tsv", lines, trailer=damage != "trailer")
    if damage == "count":
        path.write_text(path.read_text().replace(f"records={len(lines)}", f"records={len(lines) - 1}"))
    for read in (lambda: read_syscalls(path), lambda: read_syscalls_of(path, SEND_CALLS, 4_096)):
        with pytest.raises(InputError, match=message):
            read()


def test_a_run_reads_a_long_file_in_pieces_and_holds_only_the_kept_calls(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import hostwire.read.syscalls as syscalls
    from hostwire.run import Run

    (tmp_path / "raw").mkdir()
    path = write_log(tmp_path / "raw" / "syscalls.tsv", records(3_000))
    run = Run(tmp_path, {"status": "complete"})
    monkeypatch.setattr(syscalls, "PIECE_BYTES", 10_000)
    assert syscalls.read_in_pieces(path)
    got = run.df_syscalls(SEND_CALLS)
    pd.testing.assert_frame_equal(got, sends_of_the_whole(path))
    assert run.keeps(("syscalls", SEND_CALLS)) and not run.keeps("syscalls")
    # a Run that holds the whole table filters it instead of reading the file again
    whole = run.df_syscalls()
    pd.testing.assert_frame_equal(run.df_syscalls(("read",)), whole[whole["call"] == "read"].reset_index(drop=True))
