"""hw-iotrace --preload when a process ends under writing threads: every call made is recorded once
(unfinished when it never returned) or counted lost, whether one thread calls exit(), the process
is killed with SIGKILL or a thread execs, and nothing is lost at all when it ends by exit().

The traced program (tests/thread_end.c) runs 8 threads writing to /dev/null; each counts the calls
it started and those that returned in a shared file, read after the end. Per thread, the calls
that returned <= the finished records <= the finished and unfinished records <= the calls started
(at most one call, the one in flight at the end, is in neither or both).

Under a sanitizer build (HOSTWIRE_BUILD=build/asan, or build/tsan from `make SAN=thread build-c`)
the library and the program are the sanitized ones and the sanitizer's runtime is preloaded first.
"""

from __future__ import annotations

import os
import re
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from hostwire.read.syscalls import read_counters, read_syscalls

TIMEOUT = 120
NTHREADS = 8
AFTER_WRITES = 1000  # the exec'd image's writes (thread_end.c)
SANITIZER_REPORTS = ("ERROR: AddressSanitizer", "WARNING: ThreadSanitizer", "runtime error:", "ERROR: LeakSanitizer")


def sanitizer_runtime(lib: Path) -> Path | None:
    """The sanitizer runtime the library was linked with (libasan, libtsan), or None."""
    out = subprocess.run(["ldd", str(lib)], capture_output=True, text=True, check=True).stdout
    found = re.search(r"(lib[at]san\.so[.\d]*) => (\S+)", out)
    return Path(found.group(2)) if found else None


def read_counts(path: Path) -> tuple[int, list[tuple[int, int, int]]]:
    """The program's pid and each thread's (tid, started, completed); the last is the exec'd image."""
    data = path.read_bytes()
    return (struct.unpack_from("<q", data, 0)[0],
            [struct.unpack_from("<qqq", data, 64 * (k + 1)) for k in range(NTHREADS + 1)])


def run(build_dir: Path, tmp_path: Path, ending: str, env_extra: dict[str, str] | None = None
        ) -> tuple[pd.DataFrame, dict, list[tuple[int, int, int]], int, str]:
    lib = build_dir / "lib" / "libhwiowrap.so"
    runtime = sanitizer_runtime(lib)
    writes = "5000" if runtime else "20000"
    env = {**os.environ, **(env_extra or {})}
    if runtime:
        env["LD_PRELOAD"] = str(runtime)  # hw-iotrace keeps it first and adds the library after it
    out, counts = tmp_path / "e.tsv", tmp_path / "counts"
    argv = [build_dir / "bin" / "hw-iotrace", "--preload", "-e", "write", "-o", out, "--",
            build_dir / "test-progs" / "iotrace-thread-end", ending, counts, writes]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        if ending == "kill":
            ready = proc.stdout.readline().split()
            assert ready[:1] == ["ready"], proc.communicate(timeout=TIMEOUT)
            time.sleep(0.05)  # the threads still writing
            os.kill(int(ready[1]), signal.SIGKILL)
        _, stderr = proc.communicate(timeout=TIMEOUT)
    finally:
        proc.kill()
        proc.wait()
    assert not any(report in stderr for report in SANITIZER_REPORTS), stderr
    pid, threads = read_counts(counts)
    df = read_syscalls(out)
    return df[(df.pid == pid) & (df.fd_desc == "/dev/null")], read_counters(out), threads, proc.returncode, stderr


def check_threads(df: pd.DataFrame, threads: list[tuple[int, int, int]]) -> tuple[int, int]:
    """Each thread's records against its counts; returns (calls completed, records) over all."""
    completed_all = records_all = 0
    for tid, started, completed in threads:
        mine = df[df.tid == tid]
        finished, unfinished = int((~mine.unfinished).sum()), int(mine.unfinished.sum())
        assert completed <= finished <= finished + unfinished <= started, (tid, started, completed, finished,
                                                                          unfinished)
        done = mine[~mine.unfinished]  # one thread's calls follow each other: none twice
        assert (done.t_enter_ns.to_numpy()[1:] >= done.t_exit_ns.to_numpy()[:-1]).all()
        completed_all += completed
        records_all += len(mine)
    return completed_all, records_all


@pytest.mark.sanitized
def test_exit_from_one_thread_loses_nothing(build_dir: Path, tmp_path: Path) -> None:
    df, counters, threads, rc, stderr = run(build_dir, tmp_path, "exit")
    assert rc == 0, stderr
    completed, records = check_threads(df, threads[:NTHREADS])
    assert counters["lost"] == 0 and records == len(df), (completed, records, counters)
    assert counters["records_written"] == records and counters["unfinished"] == int(df.unfinished.sum())


@pytest.mark.sanitized
def test_sigkill_loses_nothing_made(build_dir: Path, tmp_path: Path) -> None:
    df, counters, threads, rc, stderr = run(build_dir, tmp_path, "kill")
    assert rc == 128 + signal.SIGKILL, stderr
    completed, records = check_threads(df, threads[:NTHREADS])
    assert counters["lost"] == 0 and counters["exit_signal"] == signal.SIGKILL, (completed, records, counters)


@pytest.mark.sanitized
def test_exec_from_one_thread_loses_nothing(build_dir: Path, tmp_path: Path) -> None:
    df, counters, threads, rc, stderr = run(build_dir, tmp_path, "exec")
    assert rc == 0, stderr
    check_threads(df, threads[:NTHREADS])
    tid, started, completed = threads[NTHREADS]  # the exec'd image, re-attached through the descriptor
    after = df[df.tid == tid]
    assert started == completed == AFTER_WRITES and len(after) == AFTER_WRITES and not after.unfinished.any()
    assert counters["lost"] == 0


def test_a_full_region_counts_the_calls_it_cannot_hold(build_dir: Path, tmp_path: Path) -> None:
    slots = 4096
    df, counters, threads, rc, stderr = run(build_dir, tmp_path, "exit", {"HWIOWRAP_SLOTS": str(slots)})
    assert rc == 0, stderr
    started = sum(t[1] for t in threads[:NTHREADS])
    completed = sum(t[2] for t in threads[:NTHREADS])
    assert len(df) <= slots and counters["lost"] > 0
    assert completed <= len(df) + counters["lost"] <= started
    assert counters["calls_seen"] == counters["records_written"] + counters["lost"]


def test_bad_region_size_is_a_usage_error(build_dir: Path, tmp_path: Path) -> None:
    proc = subprocess.run([build_dir / "bin" / "hw-iotrace", "--preload", "-o", tmp_path / "x.tsv", "--", "true"],
                          capture_output=True, text=True, timeout=TIMEOUT, env={**os.environ, "HWIOWRAP_SLOTS": "3"})
    assert proc.returncode == 2 and "HWIOWRAP_SLOTS" in proc.stderr, proc.stderr


SUBPROCESS = """
import subprocess
subprocess.run(["sh", "-c", "echo x >/dev/null"], check=True)  # close_fds: only 0, 1, 2 reach sh
"""


def test_an_image_whose_descriptor_was_closed_attaches_by_path(build_dir: Path, tmp_path: Path) -> None:
    """Python's subprocess closes every descriptor but 0-2 before its exec: the exec'd image finds
    the region through HWIOWRAP_REGION instead of the inherited descriptor."""
    out = tmp_path / "s.tsv"
    proc = subprocess.run([build_dir / "bin" / "hw-iotrace", "--preload", "-e", "write", "-o", out, "--",
                           sys.executable, "-c", SUBPROCESS], capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0 and "not tracing" not in proc.stderr, proc.stderr
    df = read_syscalls(out)
    assert list(df[df.fd_desc == "/dev/null"].req_bytes) == [2]
