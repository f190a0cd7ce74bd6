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
    from hostwire.run_directory import Run

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


def test_each_fds_bytes_add_up_piece_by_piece(tmp_path: Path) -> None:
    """main_send_fds of the pieces is the whole table's: bytes summed per (pid, fd), the stream
    named by the description of the fd's latest call by entry, also when an fd is reused for
    another connection and the file's order is not the entries' (hand-built at the end)."""
    from hostwire.read.syscalls import iter_syscalls_of
    from hostwire.timeline.stream_tables import main_send_fds

    lines = records(4_000, seed=3)
    for k in range(0, len(lines), 7):  # fd 3 of pid 100 names another connection from time to time
        fields = lines[k].split("\t")
        fields[2], fields[5], fields[8] = "100", "3", "tcp"
        fields[9] = "198.18.0.1:41%03d>198.18.0.2:5001" % (k % 13)
        lines[k] = "\t".join(fields)
    # fd 3's two latest calls by entry, in pieces far apart: the later entry written first
    later = "2000000000500\t2000000000900\t100\t100\twrite\t3\t10\t10\ttcp\t198.18.0.1:42000>198.18.0.2:5001\t0\n"
    earlier = "2000000000100\t2000000001000\t100\t100\twrite\t3\t10\t10\ttcp\t198.18.0.1:42001>198.18.0.2:5001\t0\n"
    path = write_log(tmp_path / "syscalls.tsv", lines[:-300] + [later] + lines[-300:] + [earlier])
    whole = main_send_fds(sends_of_the_whole(path))
    for piece_bytes in (700, 1_500, 8 << 10):  # (300 records: over 8 KiB between the two)
        pieces = iter_syscalls_of(path, SEND_CALLS, piece_bytes)
        pd.testing.assert_frame_equal(main_send_fds(pieces), whole)
    fd3 = whole.set_index("pid").loc[100]
    assert int(fd3["fd"]) == 3 and fd3["stream"] == "198.18.0.1:42000>198.18.0.2:5001"  # the latest entry


@pytest.mark.parametrize("piece_bytes", [2_000, 10_000])
def test_the_writes_held_on_disk_are_the_writes_of_the_whole_file(tmp_path: Path, piece_bytes: int,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """send_writes_on_disk (a long run's gap inputs) gives every stream the writes stream_writes
    gives it (each stream's rows in the file's order, not by entry), without holding the calls."""
    import hostwire.read.syscalls as syscalls
    from hostwire.run_directory import Run
    from hostwire.timeline.build import Timeline, send_writes_on_disk

    (tmp_path / "raw").mkdir()
    write_log(tmp_path / "raw" / "syscalls.tsv", records(3_000, seed=5))
    whole = Timeline.of(Run(tmp_path, {"status": "complete"})).writes()
    monkeypatch.setattr(syscalls, "PIECE_BYTES", piece_bytes)
    run = Run(tmp_path, {"status": "complete"})
    on_disk = send_writes_on_disk(Timeline.of(run))
    assert on_disk is not None and not run.keeps("syscalls") and not run.keeps(("syscalls", SEND_CALLS))
    assert list(on_disk["stream"].cat.categories) == sorted(set(whole["stream"]))
    key = ["stream", "t_enter_ns", "t_exit_ns", "pid", "bytes"]
    expected = whole.assign(stream=whole["stream"].astype(str))[key].sort_values(key, kind="stable")
    got = on_disk.assign(stream=on_disk["stream"].astype(str))[key].sort_values(key, kind="stable")
    assert len(got) > 1_000
    pd.testing.assert_frame_equal(got.reset_index(drop=True), expected.reset_index(drop=True))
