"""hw-iotrace against ground truth: a program with a known sequence of I/O calls; plus signals,
attach, errors, reused descriptors, long loops and threads (against strace:
test_iotrace_strace.py; the reader: test_iotrace_reader.py)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from hostwire.errors import InputError
from hostwire.read.syscalls import read_counters, read_syscalls


sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this file (importlib mode)
from iotrace_helpers import (KNOWN_CHILD, KNOWN_PARENT, TIMEOUT, between_markers, check_descriptions,  # noqa: E402
                             check_stamps, per_process, run_known, tools)

@pytest.mark.privileged("ptrace")
@pytest.mark.sanitized
def test_ptrace_records_the_known_sequence(build_dir: Path, tmp_path: Path) -> None:
    df, counters, stdout = run_known(build_dir, tmp_path)
    assert df.attrs["meta"]["backend"] == "ptrace" and df.attrs["meta"]["mode"] == "seccomp"
    known = between_markers(df)
    assert per_process(known) == [KNOWN_PARENT, KNOWN_CHILD]
    check_descriptions(known, stdout)
    check_stamps(df)
    assert counters["mode"] == "seccomp" and counters["tracees"] == 2
    assert counters["calls_seen"] == counters["records_written"] == len(df)
    assert counters["unfinished"] == 0 and counters["lost"] == 0 and counters["exit_code"] == 0


@pytest.mark.privileged("ptrace")
def test_ptrace_without_seccomp_records_the_same(build_dir: Path, tmp_path: Path) -> None:
    df, counters, stdout = run_known(build_dir, tmp_path, "--no-seccomp")
    assert counters["mode"] == "syscall-stops"
    assert per_process(between_markers(df)) == [KNOWN_PARENT, KNOWN_CHILD]
    check_descriptions(between_markers(df), stdout)


def test_preload_records_the_known_sequence(build_dir: Path, tmp_path: Path) -> None:
    df, counters, stdout = run_known(build_dir, tmp_path, "--preload")
    assert df.attrs["meta"]["backend"] == "preload"
    assert per_process(between_markers(df)) == [KNOWN_PARENT, KNOWN_CHILD]
    check_descriptions(between_markers(df), stdout)
    check_stamps(df)
    assert counters["records_written"] == len(df) and counters["unfinished"] == 0


def test_preload_marks_a_region_the_program_wrote_over(build_dir: Path, tmp_path: Path) -> None:
    """The traced program can write into the region the library shares with hw-iotrace (here through
    its inherited descriptor): hw-iotrace reads it with its own geometry, keeps the records, and
    says in the last line that the file is not whole."""
    out = tmp_path / "d.tsv"
    script = ("cat /etc/hostname >/dev/null; "
              'printf "not a region head, and long enough" | dd of=/proc/self/fd/$HWIOWRAP_FD conv=notrunc status=none')
    proc = subprocess.run([tools(build_dir)[0], "--preload", "-o", out, "--", "sh", "-c", script],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 1 and "its head was overwritten" in proc.stderr, proc.stderr
    last = out.read_text().splitlines()[-1]
    assert last.startswith("# damaged: failed to read the shared region: its head was overwritten")
    with pytest.raises(InputError, match="the writer marked the file damaged"):
        read_syscalls(out)
    kept = read_syscalls(out, keep_damaged=True)
    assert ((kept.call == "read") & (kept.fd_desc == "/etc/hostname")).any()


@pytest.mark.privileged("ptrace")
def test_selected_calls_only(build_dir: Path, tmp_path: Path) -> None:
    df, _, _ = run_known(build_dir, tmp_path, "-e", "sendto,splice")
    assert per_process(df) == [[("sendto", 5, 6, 6, "tcp"), ("splice", 6, 20, 20, "file")]]
    df, _, _ = run_known(build_dir, tmp_path, "--preload", "-e", "sendmmsg")
    assert per_process(df) == [[("sendmmsg", 10, 7, 2, "udp")]]


# ---- strace on the same program ----


def blocked_reader(hw_iotrace: Path, out: Path, *args: str) -> subprocess.Popen:
    """hw-iotrace running `cat` blocked in read() on an empty pipe (whose write end stays open
    until the test ends)."""
    rfd, wfd = os.pipe()
    proc = subprocess.Popen([hw_iotrace, "-o", out, *args, "--", "cat"], stdin=rfd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    os.close(rfd)
    proc.keep_open = wfd  # type: ignore[attr-defined]
    return proc


def wait_for_blocked_read(proc: subprocess.Popen) -> int:
    """The pid of cat once it sleeps in read(0)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        kids = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        for kid in kids:
            try:
                syscall = Path(f"/proc/{kid}/syscall").read_text().split()
                comm = Path(f"/proc/{kid}/comm").read_text().strip()
            except OSError:
                continue
            if comm == "cat" and syscall[:2] == ["0", "0x0"]:  # read(0, ...), not the loader's reads
                return int(kid)
        time.sleep(0.02)
    raise AssertionError("cat never blocked in read")


@pytest.mark.privileged("ptrace")
@pytest.mark.parametrize("args", [[], ["--no-seccomp"], ["--preload"]], ids=["ptrace", "no-seccomp", "preload"])
def test_sigterm_passes_the_signal_and_writes_the_open_call(build_dir: Path, tmp_path: Path, args: list[str]) -> None:
    hw_iotrace, _ = tools(build_dir)
    out = tmp_path / "s.tsv"
    proc = blocked_reader(hw_iotrace, out, *args)
    try:
        cat = wait_for_blocked_read(proc)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=TIMEOUT)
    finally:
        proc.kill()
        proc.wait()
        os.close(proc.keep_open)
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert "1 unfinished" in stderr
    df = read_syscalls(out)
    last = df[df.pid == cat].iloc[-1]
    assert (last.call, last.fd, bool(last.unfinished), last.result is pd.NA) == ("read", 0, True, True)
    assert last.fd_kind == "pipe"
    counters = read_counters(out)
    assert counters["unfinished"] == 1 and counters["exit_signal"] == signal.SIGTERM


@pytest.mark.privileged("ptrace")
def test_kill_on_exit_kills_the_tracee(build_dir: Path, tmp_path: Path) -> None:
    hw_iotrace, _ = tools(build_dir)
    proc = blocked_reader(hw_iotrace, tmp_path / "k.tsv", "--kill-on-exit")
    try:
        wait_for_blocked_read(proc)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=TIMEOUT)
    finally:
        proc.kill()
        proc.wait()
        os.close(proc.keep_open)
    assert proc.returncode == 128 + signal.SIGKILL
    assert read_counters(tmp_path / "k.tsv")["unfinished"] == 1


@pytest.mark.privileged("ptrace")
def test_attach_records_then_detaches_and_the_process_lives_on(build_dir: Path, tmp_path: Path) -> None:
    hw_iotrace, _ = tools(build_dir)
    target = subprocess.Popen(["sh", "-c", "while :; do echo x >/dev/null; sleep 0.02; done"])
    try:
        out = tmp_path / "a.tsv"
        proc = subprocess.run([hw_iotrace, "-p", str(target.pid), "-o", out, "--duration", "1"],
                              capture_output=True, text=True, timeout=TIMEOUT)
        assert proc.returncode == 0, proc.stderr
        assert "no seccomp filter" in proc.stderr
        df = read_syscalls(out)
        writes = df[(df.pid == target.pid) & (df.call == "write")]
        assert len(writes) >= 5
        assert (writes.fd == 1).all() and (writes.result == 2).all() and (writes.fd_desc == "/dev/null").all()
        assert read_counters(out)["mode"] == "syscall-stops"
        status = Path(f"/proc/{target.pid}/status").read_text()
        assert re.search(r"TracerPid:\s+0\b", status)
        time.sleep(0.1)
        assert target.poll() is None  # still running, untraced
    finally:
        target.kill()
        target.wait()


@pytest.mark.privileged("ptrace")
def test_attach_refusals_explain(build_dir: Path, tmp_path: Path) -> None:
    hw_iotrace, _ = tools(build_dir)
    proc = subprocess.run([hw_iotrace, "-p", "999999999", "-o", tmp_path / "x.tsv"], capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert proc.returncode == 1
    assert proc.stderr.strip() == "hw-iotrace: failed to attach to pid 999999999: no such process"
    traced = subprocess.Popen(["strace", "-o", "/dev/null", "sleep", "30"])
    try:
        deadline = time.monotonic() + 10
        sleeper = None
        while sleeper is None and time.monotonic() < deadline:
            kids = Path(f"/proc/{traced.pid}/task/{traced.pid}/children").read_text().split()
            if kids and Path(f"/proc/{kids[0]}/comm").read_text().strip() == "sleep":
                sleeper = int(kids[0])
            time.sleep(0.02)
        assert sleeper
        proc = subprocess.run([hw_iotrace, "-p", str(sleeper), "-o", tmp_path / "y.tsv"], capture_output=True,
                              text=True, timeout=TIMEOUT)
        assert proc.returncode == 1
        assert proc.stderr.strip() == (f"hw-iotrace: failed to attach to pid {sleeper}: "
                                       f"already traced by pid {traced.pid}")
    finally:
        traced.kill()
        traced.wait()


@pytest.mark.sanitized
@pytest.mark.parametrize("args, needle", [
    (["-e", "write,bogus", "--", "true"], "failed to parse -e: unknown call 'bogus'"),
    (["-p", "12x"], "failed to parse -p: expected a process id, got '12x'"),
    ([], "give either -p PID or -- CMD ARGS"),
    (["-p", "1", "--", "true"], "give either -p PID or -- CMD ARGS"),
    (["--preload", "-p", "1"], "cannot attach"),
    (["--duration", "0", "--", "true"], "failed to parse --duration"),
])
def test_bad_usage_is_one_line_and_exit_2(build_dir: Path, tmp_path: Path, args: list[str], needle: str) -> None:
    hw_iotrace, _ = tools(build_dir)
    proc = subprocess.run([hw_iotrace, *args], capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and needle in proc.stderr and proc.stderr.startswith("hw-iotrace: ")


def test_help_has_examples(build_dir: Path) -> None:
    proc = subprocess.run([tools(build_dir)[0], "--help"], capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0 and "EXAMPLES" in proc.stdout and "--preload" in proc.stdout


@pytest.mark.privileged("ptrace")
def test_missing_command_is_exit_127_and_unwritable_output_exit_1(build_dir: Path, tmp_path: Path) -> None:
    hw_iotrace, _ = tools(build_dir)
    proc = subprocess.run([hw_iotrace, "-o", tmp_path / "m.tsv", "--", "/nonexistent/prog"], capture_output=True,
                          text=True, timeout=TIMEOUT)
    assert proc.returncode == 127 and "failed to run /nonexistent/prog" in proc.stderr
    proc = subprocess.run([hw_iotrace, "-o", tmp_path / "no" / "m.tsv", "--", "true"], capture_output=True,
                          text=True, timeout=TIMEOUT)
    assert proc.returncode == 1
    assert proc.stderr.strip().startswith(f"hw-iotrace: failed to open {tmp_path}/no/m.tsv: No such file")


# ---- the reader ----


FD_REUSE = """
import os, socket, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"a")
r, w = os.pipe()
os.dup2(w, fd)
os.write(fd, b"bb")
os.close(fd)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0))
s.connect(s.getsockname())
os.write(s.fileno(), b"ccc")
print(fd, s.fileno(), s.getsockname()[1])
"""


@pytest.mark.privileged("ptrace")
@pytest.mark.parametrize("backend", [[], ["--preload"]], ids=["ptrace", "preload"])
def test_reused_fd_numbers_are_described_again(build_dir: Path, tmp_path: Path, backend: list[str]) -> None:
    """dup2 onto a described fd, and a close the tracer does not record (-e write), then a socket
    on the same number: each write names what the fd is at that time."""
    hw_iotrace, _ = tools(build_dir)
    out = tmp_path / "r.tsv"
    proc = subprocess.run([hw_iotrace, "-e", "write", "-o", out, *backend, "--", sys.executable, "-c", FD_REUSE,
                           tmp_path / "f.dat"], capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    fd, sfd, port = (int(x) for x in proc.stdout.split())
    assert fd == sfd
    df = read_syscalls(out)
    mine = df[(df.fd == fd) & df.req_bytes.isin([1, 2, 3])]
    assert list(zip(mine.req_bytes, mine.fd_kind.astype(str))) == [(1, "file"), (2, "pipe"), (3, "udp")]
    assert mine.fd_desc.iloc[0] == str(tmp_path / "f.dat")
    assert mine.fd_desc.iloc[2] == f"127.0.0.1:{port}>127.0.0.1:{port}"


@pytest.mark.privileged("ptrace")
@pytest.mark.parametrize("args", [[], ["--preload"]], ids=["ptrace", "preload"])
def test_every_call_of_a_long_loop_is_recorded_inside_its_own_clock_readings(
        build_dir: Path, tmp_path: Path, args: list[str]) -> None:
    """150000 writes (more than one preload buffer): all recorded, in order, and stamped inside
    the loop's own CLOCK_MONOTONIC readings (the preload backend's TSC mapping included)."""
    hw_iotrace = tools(build_dir)[0]
    loop = tools(build_dir)[1].parent / "iotrace-write-loop"
    out = tmp_path / "l.tsv"
    n = 150000
    proc = subprocess.run([hw_iotrace, "-e", "write", "-o", out, *args, "--", loop, "write", str(n)],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    t0, t1 = (int(re.search(rf"{k}=(\d+)", proc.stdout).group(1)) for k in ("t0_ns", "t1_ns"))
    df = read_syscalls(out)
    w = df[(df.fd_desc == "/dev/null") & (df.call == "write")]
    assert len(w) == n and (w.result == 1).all() and (w.req_bytes == 1).all()
    assert w.t_enter_ns.is_monotonic_increasing and (w.t_exit_ns >= w.t_enter_ns).all()
    assert (w.t_enter_ns.iloc[1:].to_numpy() >= w.t_exit_ns.iloc[:-1].to_numpy()).all()
    assert t0 <= w.t_enter_ns.iloc[0] and w.t_exit_ns.iloc[-1] <= t1
    counters = read_counters(out)
    assert counters["records_written"] == len(df) and counters["lost"] == 0


THREADS = """
import os, sys, threading
fd = os.open("/dev/null", os.O_WRONLY)
tids = []
def work(k):
    tids.append(threading.get_native_id())
    for _ in range(2000):
        os.write(fd, b"x" * k)
threads = [threading.Thread(target=work, args=(k,)) for k in (1, 2, 3, 4)]
for t in threads: t.start()
for t in threads: t.join()
print(os.getpid(), *tids)
"""


@pytest.mark.privileged("ptrace")
@pytest.mark.parametrize("args", [[], ["--preload"]], ids=["ptrace", "preload"])
def test_threads_each_get_their_records(build_dir: Path, tmp_path: Path, args: list[str]) -> None:
    hw_iotrace = tools(build_dir)[0]
    out = tmp_path / "t.tsv"
    proc = subprocess.run([hw_iotrace, "-e", "write", "-o", out, *args, "--", sys.executable, "-c", THREADS],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    pid, *tids = (int(x) for x in proc.stdout.split())
    df = read_syscalls(out)
    w = df[df.fd_desc == "/dev/null"]
    assert (w.pid == pid).all()
    per_tid = w.groupby("tid").req_bytes.agg(["count", "min", "max"])
    assert sorted(per_tid.index) == sorted(tids)
    assert (per_tid["count"] == 2000).all() and (per_tid["min"] == per_tid["max"]).all()
    assert sorted(per_tid["min"]) == [1, 2, 3, 4]


@pytest.mark.privileged("ptrace")
def test_attach_follows_every_thread(build_dir: Path, tmp_path: Path) -> None:
    script = ("import os, threading, time\n"
              "fd = os.open('/dev/null', os.O_WRONLY)\n"
              "def work():\n"
              "    while True:\n"
              "        os.write(fd, b'x'); time.sleep(0.005)\n"
              "for _ in range(3): threading.Thread(target=work, daemon=True).start()\n"
              "print('ready', flush=True)\n"
              "time.sleep(60)\n")
    target = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout.readline().strip() == "ready"
        out = tmp_path / "t.tsv"
        proc = subprocess.run([tools(build_dir)[0], "-p", str(target.pid), "-e", "write", "-o", out, "--duration",
                               "1"], capture_output=True, text=True, timeout=TIMEOUT)
        assert proc.returncode == 0, proc.stderr
        w = read_syscalls(out)
        w = w[w.fd_desc == "/dev/null"]
        assert w.tid.nunique() == 3 and (w.pid == target.pid).all()
        assert len(os.listdir(f"/proc/{target.pid}/task")) == 4 and target.poll() is None
    finally:
        target.kill()
        target.wait()
