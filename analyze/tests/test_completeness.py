"""A raw log that is not whole is never read as whole: files written by the real tools, cut (in the
middle of a value, at a line boundary, before the trailer), read back through every reader; the
writers mark what they could not finish; hw-bench refuses a log that could hold nothing."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from hostwire.read.bench import load_bench
from hostwire.cli import main
from hostwire.errors import InputError
from hostwire.record.resources import ResourceSampler
from hostwire.read.resources import read_resources
from hostwire.read.sched import read_sched_json, read_sched_tsv
from hostwire.read.syscalls import read_syscalls
from hostwire.read.tsv import read_tsv

TIMEOUT = 120
TRACEFS = Path("/sys/kernel/tracing")
TAG = f"cp{os.getpid()}"


def metrics(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["metrics", *args])
    return code, out.getvalue(), err.getvalue()


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


# ---------------------------------------------------------------- a real run, cut

@pytest.fixture(scope="module")
def loopback_run(tmp_path_factory: pytest.TempPathFactory, build_dir: Path) -> Path:
    """A short loopback run of hw-bench main through the runner (no capture, no kernel trace):
    raw/bench/*.tsv and raw/resources.tsv as the real writers leave them."""
    from hostwire.record.runner import RunPoint, record_run

    root = tmp_path_factory.mktemp("runs")
    point = RunPoint(senders=2, background=1, warmup_s=0.2, duration_s=0.5, quiet_s=0.2, topology="loopback",
                     capture=False, kernel_trace=False)
    record = record_run(root, "r1", point)
    assert record.status == "complete", record.reason
    return record.directory


@pytest.fixture
def run_copy(loopback_run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(loopback_run, copy)
    return copy


def test_the_writers_close_every_log_with_a_trailer_that_matches(loopback_run: Path) -> None:
    bench = load_bench(loopback_run / "raw" / "bench")
    summary = bench.summary
    for role in ["main", *bench.roles("send"), *bench.roles("recv"), *bench.roles("bg")]:
        path = bench.directory / f"{role}.tsv"
        assert lines_of(path)[0] == b"# format: hostwire-tsv 2\n"
        last = lines_of(path)[-1].decode()
        log = bench.log(role)
        assert log.damage is None and log.df.attrs["damage"] is None
        if role.startswith(("send-", "recv-")):
            assert last == f"# end: records={len(log.df)} bytes={log.df['bytes'].sum()}\n"
        else:
            assert last == f"# end: records={len(log.df)}\n"
    for recv in summary["receivers"]:
        assert bench.log(recv["role"]).df["bytes"].sum() == recv["bytes_window"]
    resources = loopback_run / "raw" / "resources.tsv"
    df = read_resources(resources)
    samples = df["t_ns"].nunique()
    assert lines_of(resources)[-1] == f"# end: records={len(df)} samples={samples}\n".encode()


def test_goodput_refuses_a_receiver_log_cut_in_the_middle_of_a_value(run_copy: Path) -> None:
    """The defect as reported: the last value of recv-0.tsv reads 14 instead of 1448; goodput
    used to report the cut file's bytes with exit 0."""
    path = run_copy / "raw" / "bench" / "recv-0.tsv"
    lines = lines_of(path)
    whole = load_bench(path.parent).log("recv-0").df
    last = len(lines) - 1  # the last record's line number (the trailer is line len(lines))
    record = lines[-2]
    value = record.rsplit(b"\t", 1)[1].rstrip(b"\n")
    keep = max(0, len(value) - 2)  # 1448 reads 14
    path.write_bytes(b"".join(lines[:-2]) + record[: len(record) - 1 - len(value) + keep])
    code, out, err = metrics("goodput", str(run_copy))
    assert code == 1 and out == ""
    assert err.strip() == f"hostwire: {path}:{last}: last record cut (no final newline)"
    # what can be read: every record before the cut one
    log = load_bench(path.parent).log("recv-0", keep_damaged=True)
    pd.testing.assert_frame_equal(log.df, whole.iloc[:-1], check_like=False)
    assert log.damage == log.df.attrs["damage"]
    assert (log.damage["file"], log.damage["line"]) == (str(path), last)
    received = load_bench(path.parent).df_received(keep_damaged=True)
    assert [d["line"] for d in received.attrs["damage"]] == [last]


def test_a_log_without_its_trailer_is_refused_naming_the_line(run_copy: Path) -> None:
    """Cut at a line boundary, the file still ends with a newline: only the trailer tells."""
    bench_dir = run_copy / "raw" / "bench"
    path = bench_dir / "send-1.tsv"
    lines = lines_of(path)
    path.write_bytes(b"".join(lines[:-4]))  # the trailer and three records gone
    with pytest.raises(InputError) as info:
        load_bench(bench_dir).log("send-1")
    assert str(info.value) == (f"{path}:{len(lines) - 3}: no '# end: records=N' trailer: the file is "
                               "incomplete (its writer did not finish)")
    log = load_bench(bench_dir).log("send-1", keep_damaged=True)
    assert len(log.df) == len(lines) - 4 - (len(log.meta) + 1)  # less the metadata and column lines
    assert log.damage["line"] == len(lines) - 3
    code, _, err = metrics("intervals", str(run_copy))
    assert code == 1 and err.count("\n") == 1 and "send-1.tsv" in err and "trailer" in err


def test_the_trailer_counts_are_checked(run_copy: Path) -> None:
    bench_dir = run_copy / "raw" / "bench"
    path = bench_dir / "recv-1.tsv"
    lines = lines_of(path)
    header = sum(1 for line in lines if line.startswith(b"#")) - 1 + 1  # metadata lines + columns
    path.write_bytes(b"".join(lines[:header + 5] + lines[header + 6:]))  # one record gone, mid-file
    with pytest.raises(InputError, match=re.escape(f"recv-1.tsv:{len(lines) - 1}: the trailer counts "
                                                   f"{len(lines) - header - 1} records, the file holds "
                                                   f"{len(lines) - header - 2}")):
        load_bench(bench_dir).log("recv-1")


def as_version_1(path: Path, keep: int | None = None) -> list[bytes]:
    """Rewrites a log as a version-1 writer would have left it (no trailer), keeping `keep`
    records."""
    lines = lines_of(path)
    if lines[-1].startswith(b"# end:"):
        lines = lines[:-1]
    count = next(i for i, line in enumerate(lines) if not line.startswith(b"#"))
    header, body = lines[:count], lines[count:]
    header[0] = b"# format: hostwire-tsv 1\n"
    body = body if keep is None else body[:keep + 1]
    path.write_bytes(b"".join(header + body))
    return header + body


def test_version_1_logs_are_read_and_checked_against_their_header_and_bench_json(run_copy: Path) -> None:
    bench_dir = run_copy / "raw" / "bench"
    whole = load_bench(bench_dir).log("recv-0").df
    as_version_1(bench_dir / "recv-0.tsv")
    pd.testing.assert_frame_equal(load_bench(bench_dir).log("recv-0").df, whole)
    # cut at a line boundary: the file's own checks pass, bench.json's totals do not
    lines = as_version_1(bench_dir / "recv-0.tsv", keep=len(whole) - 3)
    events = next(r["events"] for r in load_bench(bench_dir).summary["receivers"] if r["role"] == "recv-0")
    with pytest.raises(InputError, match=re.escape(
            f"recv-0.tsv:{len(lines) + 1}: {len(whole) - 3} records, but bench.json counts {events} events "
            "logged by recv-0")):
        load_bench(bench_dir).log("recv-0")
    # a read that cannot be: more bytes in the window than over the whole connection
    recv = bench_dir / "recv-1.tsv"
    lines = as_version_1(recv)
    total_line = next(i for i, line in enumerate(lines, 1) if line.startswith(b"# bytes_total:"))
    fields = lines[-1].split(b"\t")
    lines[-1] = b"\t".join([*fields[:-1], b"999999999999\n"])
    recv.write_bytes(b"".join(lines))
    with pytest.raises(InputError, match=rf"recv-1.tsv:{total_line}: the reads sum to \d+ bytes, more than "
                                         r"bytes_total \d+"):
        load_bench(bench_dir).log("recv-1")


# ---------------------------------------------------------------- hw-bench options

@pytest.mark.parametrize("args, needle", [
    (["main", "--log-capacity", "0"], "--log-capacity: expected an integer from 1 to 268435456, got '0'"),
    (["main", "-M", "0", "-N", "0"], "-M 0 and -N 0: a run needs at least one process"),
    (["receive", "--log-capacity", "0"], "--log-capacity: expected an integer from 1 to 268435456, got '0'"),
])
def test_hw_bench_refuses_a_log_that_could_hold_nothing(build_dir: Path, tmp_path: Path, args: list[str],
                                                        needle: str) -> None:
    """--log-capacity 0 used to run the whole benchmark, discard every event and say ok."""
    out = tmp_path / "out"
    short = ["-M", "1", "-N", "0", "--warmup", "0", "--duration", "0.1", "--quiet", "0"] if args[0] == "main" else []
    proc = subprocess.run([str(build_dir / "bin" / "hw-bench"), args[0], "-o", str(out), *short, *args[1:]],
                          capture_output=True, timeout=TIMEOUT)  # a receiver that starts reports in binary
    stderr = proc.stderr.decode(errors="replace")
    assert proc.returncode == 2, stderr
    assert needle in stderr and len(stderr.strip().splitlines()) == 1
    assert not out.exists()


# ---------------------------------------------------------------- the readers on inline snippets

SCHED_HEAD = ("# format: hostwire-tsv {v}\n# source: hw-schedtrace\n# column_types: int int str int str int\n"
              "t_ns\tcpu\tevent\tpid\tcomm\tprev_pid\n")
SCHED_BODY = "100\t0\tsched_switch\t7\tcat\t7\n200\t1\tsched_switch\t8\tsh\t8\n300\t1\tsched_switch\t9\tdd\t9\n"


@pytest.mark.parametrize("version", [1, 2])
def test_sched_tsv_cut_mid_record(tmp_path: Path, engine: list[int], version: int) -> None:
    """The cut record used to come back as a row whose missing fields were empty."""
    path = tmp_path / "sched.tsv"
    path.write_text(SCHED_HEAD.format(v=version) + SCHED_BODY[:-6])
    with pytest.raises(InputError, match=re.escape(f"{path}:7: last record cut (no final newline)")):
        read_sched_tsv(path)
    _, df = read_sched_tsv(path, keep_damaged=True)
    assert df["t_ns"].tolist() == [100, 200] and df["prev_pid"].tolist() == [7, 8]
    assert df.attrs["damage"] == {"file": str(path), "line": 7, "byte_offset": len(SCHED_HEAD.format(v=version))
                                  + len(SCHED_BODY.split("300")[0]),
                                  "message": f"{path}:7: last record cut (no final newline)"}


def test_version_2_needs_its_trailer_and_version_1_does_not(tmp_path: Path, engine: list[int]) -> None:
    path = tmp_path / "sched.tsv"
    path.write_text(SCHED_HEAD.format(v=1) + SCHED_BODY)
    meta, df = read_sched_tsv(path)
    assert len(df) == 3 and df.attrs["damage"] is None
    path.write_text(SCHED_HEAD.format(v=2) + SCHED_BODY)
    with pytest.raises(InputError, match=re.escape(f"{path}:8: no '# end: records=N' trailer")):
        read_sched_tsv(path)
    _, df = read_sched_tsv(path, keep_damaged=True)
    assert len(df) == 3 and df.attrs["damage"]["line"] == 8
    path.write_text(SCHED_HEAD.format(v=2) + SCHED_BODY + "# end: records=3\n")
    _, df = read_sched_tsv(path)
    assert df["pid"].tolist() == [7, 8, 9] and df.attrs["damage"] is None


@pytest.mark.parametrize("body, line, message, kept", [
    ("100\t0\tsched_switch\t7\tcat\n" + SCHED_BODY, 5, "record has 5 fields, expected 6", 0),
    (SCHED_BODY.replace("\tsh\t8", "\tsh"), 6, "record has 5 fields, expected 6", 1),
    (SCHED_BODY.replace("\tsh\t8", "\tsh\t8\t1"), 6, "record has 7 fields, expected 6", 1),
    (SCHED_BODY.replace("\n200", "\n\n200"), 6, "blank line, expected a record", 1),
    (SCHED_BODY + "# end: records=4\n", 8, "the trailer counts 4 records, the file holds 3", 3),
    (SCHED_BODY + "# damaged: failed to read CPU 1 data\n", 8,
     "the writer marked the file damaged: failed to read CPU 1 data", 3),
])
def test_every_record_has_every_field(tmp_path: Path, engine: list[int], body: str, line: int, message: str, kept: int) -> None:
    path = tmp_path / "sched.tsv"
    path.write_text(SCHED_HEAD.format(v=1) + body)
    with pytest.raises(InputError, match=re.escape(f"{path}:{line}: {message}")):
        read_sched_tsv(path)
    _, df = read_sched_tsv(path, keep_damaged=True)
    assert len(df) == kept and df.attrs["damage"]["line"] == line
    assert df["t_ns"].tolist() == [100, 200, 300][:kept]


@pytest.fixture(params=["pandas", "arrow"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Which parser reads the records: pandas' (small files), or Arrow's (files of at least
    tsv._MIN_PIECE_BYTES: lowered here so that these snippets count as big). Yields a list that
    gets one entry per read Arrow completed."""
    import hostwire.read.tsv as tsv

    done: list[int] = []
    if request.param == "arrow":
        monkeypatch.setattr(tsv, "_MIN_PIECE_BYTES", 1)
        real = tsv._parse_arrow

        def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
            out = real(*args, **kwargs)
            if out is not None:
                done.append(len(out[0]))
            return out

        monkeypatch.setattr(tsv, "_parse_arrow", counted)
    return done


def test_both_parsers_read_a_sched_tsv_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import hostwire.read.tsv as tsv

    head = ("# format: hostwire-tsv 2\n# source: hw-schedtrace\n# column_types: int int str int str int uint str\n"
            "t_ns\tcpu\tevent\tpid\tcomm\tprev_pid\tip\tbuf\n")
    body = ("100\t0\tsched_switch\t7\tNA\t\t18446744071583735809\tnan\n"
            "200\t1\tprint\t-8\t\t-3\t\t\n"
            "300\t1\tsched_switch\t9\t<idle>\t9\t0\ta b\\n\n")
    path = tmp_path / "sched.tsv"
    path.write_text(head + body + "# end: records=3\n")
    _, by_pandas = read_sched_tsv(path)
    monkeypatch.setattr(tsv, "_MIN_PIECE_BYTES", 1)
    assert tsv._parse_arrow(tsv.open_tsv(path), len(head), len(head) + len(body), {
        "dtype": {"t_ns": "Int64", "comm": str}, "keep_default_na": False, "na_values": {"t_ns": [""]},
        "usecols": ["t_ns", "comm"]}) is not None
    _, by_arrow = read_sched_tsv(path)
    pd.testing.assert_frame_equal(by_arrow, by_pandas)
    assert by_arrow["comm"].tolist() == ["NA", "", "<idle>"] and by_arrow["buf"].tolist() == ["nan", "", "a b\\n"]
    assert by_arrow["prev_pid"].isna().tolist() == [True, False, False] and by_arrow["ip"].iloc[0] == 18446744071583735809


@pytest.mark.parametrize("body, message", [
    (SCHED_BODY.replace("\t8\n", "\t8x\n"), "column prev_pid: expected an integer, got '8x'"),
    (SCHED_BODY.replace("\tsh\t", "\tsh\r\t"), "carriage return in a record"),
    (SCHED_BODY.replace("\tsh\t", "\tsh\u00e9\t"), "malformed record"),
])
def test_both_parsers_name_a_bad_value(tmp_path: Path, engine: list[int], body: str, message: str) -> None:
    path = tmp_path / "sched.tsv"
    path.write_text(SCHED_HEAD.format(v=1) + body)
    with pytest.raises(InputError, match=re.escape(message)):
        read_sched_tsv(path)
    assert engine == []  # Arrow declined, pandas named the fault


def test_read_tsv_keeps_the_complete_records(tmp_path: Path) -> None:
    path = tmp_path / "a.tsv"
    path.write_text("# format: hostwire-tsv 2\n# kind: demo\nt_ns\tbytes\n1\t10\n2\t20\n3\t3")
    with pytest.raises(InputError, match=re.escape(f"{path}:6: last record cut (no final newline)")):
        read_tsv(path, dtypes={"t_ns": "int64", "bytes": "int64"})
    log = read_tsv(path, dtypes={"t_ns": "int64", "bytes": "int64"}, keep_damaged=True)
    assert log.df["bytes"].tolist() == [10, 20] and log.damage["line"] == 6
    path.write_text("# format: hostwire-tsv 2\n# kind: demo\nt_ns\tbytes\n1\t10\n2\t20\n# end: records=2 bytes=31\n")
    with pytest.raises(InputError, match=re.escape(f"{path}:6: the trailer counts 31 bytes, the records sum to 30")):
        read_tsv(path)


# ---------------------------------------------------------------- resources.tsv (the Python writer)

def test_resource_samples_without_their_trailer_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "resources.tsv"
    sampler = ResourceSampler(path, interval_s=0.02)
    sampler.start()
    try:
        time.sleep(0.1)
    finally:
        info = sampler.stop()
    df = read_resources(path)
    rows = len(df)
    assert df["t_ns"].nunique() == info["samples"] and df.attrs["damage"] is None
    lines = lines_of(path)
    assert lines[-1] == f"# end: records={rows} samples={info['samples']}\n".encode()
    path.write_bytes(b"".join(lines[:-1]))  # as if the runner had been killed before stop()
    with pytest.raises(InputError, match=re.escape(f"{path}:{len(lines)}: no '# end: records=N' trailer")):
        read_resources(path)
    cut = b"".join(lines[:-1])[:-7]
    path.write_bytes(cut)
    with pytest.raises(InputError, match=re.escape(f"{path}:{len(lines) - 1}: last record cut")):
        read_resources(path)
    kept = read_resources(path, keep_damaged=True)
    pd.testing.assert_frame_equal(kept, df.iloc[:-1], check_like=False)
    assert kept.attrs["damage"]["line"] == len(lines) - 1


# ---------------------------------------------------------------- syscalls.tsv (hw-iotrace)

def test_iotrace_marks_a_damaged_region_and_the_reader_refuses_it(build_dir: Path, tmp_path: Path) -> None:
    """The preload backend reads the region it shares with the command after the command: a
    region the command wrote over gives a syscalls.tsv whose last line says what happened."""
    hw_iotrace = str(build_dir / "bin" / "hw-iotrace")
    out = tmp_path / "syscalls.tsv"
    proc = subprocess.run([hw_iotrace, "--preload", "-o", str(out), "--", "sh", "-c", "cat /etc/hostname"],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    whole = read_syscalls(out)
    assert len(whole) > 0 and lines_of(out)[-1] == f"# end: records={len(whole)}\n".encode()
    lines = lines_of(out)
    out.write_bytes(b"".join(lines[:-1]))
    with pytest.raises(InputError, match=re.escape(f"{out}:{len(lines)}: no '# end: records=N' trailer")):
        read_syscalls(out)
    # the command writes over the region's head through its inherited descriptor
    script = ('cat /etc/hostname >/dev/null; printf "not a region head, and long enough" '
              '| dd of=/proc/self/fd/$HWIOWRAP_FD conv=notrunc status=none')
    proc = subprocess.run([hw_iotrace, "--preload", "-o", str(out), "--", "sh", "-c", script],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 1 and "its head was overwritten" in proc.stderr, proc.stderr
    last = lines_of(out)[-1].decode()
    assert last.startswith("# damaged: failed to read the shared region: its head was overwritten")
    with pytest.raises(InputError, match=re.escape(f"{out}:{len(lines_of(out))}: the writer marked the file "
                                                   "damaged: failed to read")):
        read_syscalls(out)
    kept = read_syscalls(out, keep_damaged=True)
    assert len(kept) == len(lines_of(out)) - 8 and kept.attrs["damage"]["line"] == len(lines_of(out))


# ---------------------------------------------------------------- hw-schedtrace convert

@pytest.fixture(scope="module")
def recorded_trace(build_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """A trace.dat of a pipe ping-pong pinned to the last CPU (so its data spans many pages at
    the end of the file), recorded in this module's own tracefs instance."""
    out = tmp_path_factory.mktemp("trace") / "raw"
    cpu = str((os.cpu_count() or 1) - 1)
    try:
        proc = subprocess.run([str(build_dir / "bin" / "hw-schedtrace"), "-n", TAG, "-o", str(out), "--",
                               str(build_dir / "bin" / "hw-bench"), "pingpong", "--loops", "3000", "--cpu", cpu],
                              capture_output=True, text=True, timeout=TIMEOUT)
        assert proc.returncode == 0, proc.stderr
        yield out
    finally:
        left = {p.name for p in (TRACEFS / "instances").glob(f"hw-*-{TAG}*")}
        for name in left:
            with contextlib.suppress(OSError):
                (TRACEFS / "instances" / name).rmdir()
        assert not left, f"tracefs instances left behind: {sorted(left)}"


def convert(build_dir: Path, outdir: Path, dat: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(build_dir / "bin" / "hw-schedtrace"), "convert", "-o", str(outdir), str(dat)],
                          capture_output=True, text=True, timeout=TIMEOUT)


@pytest.mark.privileged("tracefs")
def test_convert_creates_its_output_directory(build_dir: Path, tmp_path: Path, recorded_trace: Path) -> None:
    outdir = tmp_path / "not-yet"
    proc = convert(build_dir, outdir, recorded_trace / "trace.dat")
    assert proc.returncode == 0, proc.stderr
    assert (outdir / "sched.tsv").read_bytes() == (recorded_trace / "sched.tsv").read_bytes()
    _, whole = read_sched_tsv(outdir / "sched.tsv")
    assert len(whole) == read_sched_json(recorded_trace / "sched.json")["buffers"][0]["records"]
    assert lines_of(outdir / "sched.tsv")[-1] == f"# end: records={len(whole)}\n".encode()


@pytest.mark.privileged("tracefs")
def test_convert_of_a_cut_trace_leaves_a_file_marked_damaged(build_dir: Path, tmp_path: Path,
                                                             recorded_trace: Path) -> None:
    """It used to exit 1 leaving a sched.tsv that ended cleanly on a line."""
    _, whole = read_sched_tsv(recorded_trace / "sched.tsv")
    dat = recorded_trace / "trace.dat"
    cut = tmp_path / "cut.dat"
    cut.write_bytes(dat.read_bytes()[: dat.stat().st_size - 2 * 4096 - 100])  # inside the last CPU's pages
    proc = convert(build_dir, tmp_path, cut)
    assert proc.returncode == 1
    assert proc.stderr.startswith("hw-schedtrace: failed to read CPU") and proc.stderr.count("\n") == 1
    tsv = tmp_path / "sched.tsv"
    lines = lines_of(tsv)
    reason = proc.stderr.strip().removeprefix("hw-schedtrace: ")
    assert lines[-1] == f"# damaged: {reason}\n".encode()
    with pytest.raises(InputError, match=re.escape(f"{tsv}:{len(lines)}: the writer marked the file damaged: "
                                                   f"{reason}")):
        read_sched_tsv(tsv)
    _, kept = read_sched_tsv(tsv, keep_damaged=True)
    assert 0 < len(kept) < len(whole) and kept.attrs["damage"]["line"] == len(lines)
    pd.testing.assert_frame_equal(kept, whole.iloc[:len(kept)])


@pytest.mark.privileged("tracefs")
def test_a_recorded_sched_tsv_cut_mid_record(tmp_path: Path, recorded_trace: Path) -> None:
    text = (recorded_trace / "sched.tsv").read_bytes()
    middle = text.rfind(b"\n", 0, len(text) // 2) + 1
    path = tmp_path / "sched.tsv"
    path.write_bytes(text[: middle + 20])
    line = text[:middle].count(b"\n") + 1
    with pytest.raises(InputError, match=re.escape(f"{path}:{line}: last record cut (no final newline)")):
        read_sched_tsv(path)
    _, kept = read_sched_tsv(path, keep_damaged=True)
    _, whole = read_sched_tsv(recorded_trace / "sched.tsv")
    pd.testing.assert_frame_equal(kept, whole.iloc[:len(kept)])
    assert kept.attrs["damage"]["line"] == line
