"""hw-schedtrace on the live kernel: each test records in its own tracefs instance (hw-<pid>...),
under a timeout, and checks that no instance is left behind."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from hostwire.record import doctor
from hostwire.read.sched import read_sched_json, read_sched_tsv
from hostwire.read.tsv import read_header

TIMEOUT = 60
TRACEFS = Path("/sys/kernel/tracing")


def tool(build_dir: Path) -> str:
    return str(build_dir / "bin" / "hw-schedtrace")


def instances() -> set[str]:
    return {p.name for p in (TRACEFS / "instances").glob("hw-*")} if TRACEFS.is_dir() else set()


# Other programs on this machine may have hw-* instances of their own: this file only ever looks
# at (and removes) instances carrying its tag, which every collector started here gets via -n.
TAG = f"pt{os.getpid()}"


def tagged() -> set[str]:
    return {n for n in instances() if re.fullmatch(rf"hw-\d+-{TAG}(-sys)?", n)}


_started: list[subprocess.Popen] = []


@pytest.fixture
def no_leftover() -> Iterator[None]:
    yield
    while _started:  # a failed test may leave its collector running: stop it (ours only, by pid)
        proc = _started.pop()
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.communicate(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
    left = tagged()
    for name in left:  # clean up, then fail: a test must not leave instances behind
        try:
            (TRACEFS / "instances" / name).rmdir()
        except OSError:
            pass
    assert not left, f"tracefs instances left behind: {sorted(left)}"


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, **kw)


def start_collector(cmd: list[str]) -> subprocess.Popen:
    """Starts hw-schedtrace and returns once it reports that it records."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _started.append(proc)
    line = proc.stderr.readline()
    if "recording" not in line:
        proc.kill()
        out, err = proc.communicate(timeout=TIMEOUT)
        pytest.fail(f"hw-schedtrace did not start: {line}{err}")
    return proc


# ---------------------------------------------------------------- usage (no kernel needed)

@pytest.mark.sanitized
def test_help_and_usage_errors(build_dir: Path) -> None:
    res = run([tool(build_dir), "--help"])
    assert res.returncode == 0 and "EXAMPLES" in res.stdout
    for args, expected in [
        (["--duration", "abc"], "failed to parse --duration: expected a duration above 0 such as 2, 2.5s, 500ms, "
                                "1m (at most one day), got 'abc'"),
        (["--buffer-kb", "0"], "failed to parse --buffer-kb"),
        (["-p", "12"], "give --syscalls too"),
        (["--bogus"], ""),
        (["convert"], "convert needs one TRACE.DAT"),
    ]:
        res = run([tool(build_dir), *args])
        assert res.returncode == 2, (args, res.stderr)
        assert expected in res.stderr


@pytest.mark.sanitized
def test_convert_rejects_bad_files(build_dir: Path, tmp_path: Path) -> None:
    res = run([tool(build_dir), "convert", "-o", str(tmp_path), str(tmp_path / "none.dat")])
    assert res.returncode == 1
    assert res.stderr.strip().startswith("hw-schedtrace: failed to open") and res.stderr.count("\n") == 1
    bad = tmp_path / "bad.dat"
    bad.write_bytes(b"\x17\x08\x44tracing6\x00\x00\x08\x00\x10\x00\x00header_page\x00\x10")
    res = run([tool(build_dir), "convert", "-o", str(tmp_path), str(bad)])
    assert res.returncode == 1
    assert "byte 30" in res.stderr and "the file ends" in res.stderr


# ---------------------------------------------------------------- live kernel

@pytest.mark.privileged("tracefs")
def test_unknown_event_is_a_usage_error(build_dir: Path, tmp_path: Path, no_leftover: None) -> None:
    res = run([tool(build_dir), "-n", TAG, "-o", str(tmp_path), "-e", "sched:no_such_event", "--", "true"])
    assert res.returncode == 2
    assert "failed to find event sched:no_such_event" in res.stderr
    res = run([tool(build_dir), "-n", TAG, "-o", str(tmp_path), "-e", "sched:sched_switch",
               "-f", "sched:sched_switch=no_such_field == 1", "--", "true"])
    assert res.returncode == 2 and "failed to set filter" in res.stderr


@pytest.mark.privileged("tracefs")
def test_no_permission_is_one_clear_line(build_dir: Path, tmp_path: Path, no_leftover: None) -> None:
    os.chmod(tmp_path, 0o777)
    res = run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", tool(build_dir),
               "-n", TAG, "-o", str(tmp_path / "out"), "--", "true"])
    assert res.returncode == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hw-schedtrace: failed to "), res.stderr
    assert "tracefs" in lines[0] or "Permission denied" in lines[0]


@pytest.mark.privileged("tracefs")
def test_no_tracefs_is_one_clear_line(build_dir: Path, tmp_path: Path, no_leftover: None) -> None:
    """In a private mount namespace without tracefs (and without the right to mount it)."""
    script = ("umount -l /sys/kernel/tracing; umount -l /sys/kernel/debug 2>/dev/null; "
              "grep -q tracefs /proc/mounts && exit 99; "
              f"exec setpriv --inh-caps=-sys_admin --bounding-set=-sys_admin {tool(build_dir)} "
              f"-n {TAG} -o {tmp_path} -- true")
    res = run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script])
    assert res.returncode == 1, res.stderr
    assert res.stderr == ("hw-schedtrace: failed to find tracefs: it is not mounted "
                          "(mount -t tracefs nodev /sys/kernel/tracing)\n")
    assert (TRACEFS / "instances").is_dir()  # the host's mount is untouched


@pytest.mark.privileged("tracefs")
@pytest.mark.sanitized
def test_records_a_command_and_converts(build_dir: Path, tmp_path: Path, no_leftover: None) -> None:
    """Every line has t_ns, cpu, event, pid, comm; the clock check and counters are in sched.json;
    syscalls.tsv pairs enter and exit of a command's descendants exactly."""
    out = tmp_path / "raw"
    res = run([tool(build_dir), "-n", TAG, "-o", str(out), "-s", "--", "sh", "-c",
               "dd if=/dev/zero of=/dev/null bs=1000 count=50 2>/dev/null; true"])
    assert res.returncode == 0, res.stderr
    meta, df = read_sched_tsv(out / "sched.tsv")
    assert meta["format"] == "hostwire-tsv 2"
    again = run([tool(build_dir), "convert", "-o", str(tmp_path), str(out / "trace.dat")])
    assert again.returncode == 0 and (tmp_path / "sched.tsv").read_bytes() == (out / "sched.tsv").read_bytes()
    assert len(df) > 0 and df["t_ns"].is_monotonic_increasing
    assert (df["event"] != "").all() and (df["cpu"] >= 0).all()
    assert {"sched_switch", "sched_process_fork", "sched_process_exec", "sched_process_exit"} <= set(df["event"])
    summary = read_sched_json(out / "sched.json")
    sched = summary["buffers"][0]
    assert sched["records"] == len(df)
    assert summary["clock_check"]["ok"] is True
    assert abs(summary["clock_check"]["start"]["diff_ns"]) <= 10_000
    for cpu in sched["cpus"]:
        assert cpu["end"]["overrun"] == 0 and cpu["missed_in_stream"] == 0
    calls = read_calls(out / "syscalls.tsv")
    execs = df[(df["event"] == "sched_process_exec") & (df["filename"] == "/usr/bin/dd")]["arg_pid"]
    mine = set(execs) & set(calls["tid"])  # other programs may run dd meanwhile
    assert len(mine) == 1, mine
    dd_pid = int(mine.pop())
    dd = calls[calls["tid"] == dd_pid]
    reads = dd[(dd["call"] == "read") & (dd["fd"] == 0) & (dd["req_bytes"] == 1000)]
    writes = dd[(dd["call"] == "write") & (dd["fd"] == 1) & (dd["req_bytes"] == 1000)]
    assert len(reads) == 50 and (reads["result"] == 1000).all()
    assert len(writes) == 50 and (writes["result"] == 1000).all()
    assert (dd["t_exit_ns"] >= dd["t_enter_ns"]).all() and (dd["unfinished"] == 0).all()
    assert (dd["pid"] == dd_pid).all() and (dd["fd_kind"] == "unknown").all()
    shell = int(summary["command"]["pid"])
    assert shell in set(calls["tid"])  # the command itself, besides its descendant
    # the command's first read (of the start signal) was entered before tracing: no record
    assert summary["buffers"][1]["exits_without_enter"] >= 1
    assert summary["buffers"][1]["syscall_records"] == len(calls)
    try:  # hw-iotrace's reader of the same schema, where it is installed
        from hostwire.read.syscalls import read_syscalls
    except ImportError:
        return
    assert len(read_syscalls(out / "syscalls.tsv")) == len(calls)


def read_calls(path: Path) -> pd.DataFrame:
    """syscalls.tsv as written by the tracefs backend: every integer column filled, result
    empty only for unfinished calls."""
    meta, columns, skip = read_header(path)
    assert (meta["kind"], meta["backend"]) == ("syscalls", "tracefs")
    assert columns == ["t_enter_ns", "t_exit_ns", "pid", "tid", "call", "fd", "req_bytes", "result",
                       "fd_kind", "fd_desc", "unfinished"]
    # comment="#": the closing "# end: records=N" line (no field of this backend holds a '#')
    df = pd.read_csv(path, sep="\t", skiprows=skip, names=columns, header=None, keep_default_na=False,
                     na_values={"result": [""]}, dtype={"call": str, "fd_kind": str, "fd_desc": str,
                                                        "result": "Int64"}, quoting=3, comment="#")
    for col in ("t_enter_ns", "t_exit_ns", "pid", "tid", "fd", "req_bytes", "unfinished"):
        assert df[col].dtype == "int64", col
    assert (df["result"].isna() == (df["unfinished"] == 1)).all()
    return df


@pytest.mark.privileged("tracefs")
def test_pid_filter_follows_descendants_and_duration_stops(build_dir: Path, tmp_path: Path,
                                                           no_leftover: None) -> None:
    """-p PID: the system calls of PID and of a child it forks after tracing began, nobody
    else's; --duration ends the recording by itself."""
    parent = subprocess.Popen(["sh", "-c", "read x; dd if=/dev/zero of=/dev/null bs=777 count=20 2>/dev/null; true"],
                              stdin=subprocess.PIPE, text=True)
    try:
        collector = start_collector([tool(build_dir), "-n", TAG, "-o", str(tmp_path), "-s", "-p", str(parent.pid),
                                     "--duration", "2"])
        parent.stdin.write("go\n")
        parent.stdin.close()
        parent.wait(timeout=TIMEOUT)
        _, err = collector.communicate(timeout=TIMEOUT)
        assert collector.returncode == 0, err
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
    calls = read_calls(tmp_path / "syscalls.tsv")
    summary = read_sched_json(tmp_path / "sched.json")
    assert summary["buffers"][1]["pids"] == [parent.pid]
    assert 1.9e9 <= summary["stop_mono_ns"] - summary["start_mono_ns"] < 10e9
    dd = calls[(calls["req_bytes"] == 777)]
    assert len(dd) == 40 and dd["tid"].nunique() == 1 and int(dd["tid"].iloc[0]) != parent.pid
    assert set(calls["tid"]) <= {parent.pid, int(dd["tid"].iloc[0])}
    assert (calls["tid"] == parent.pid).any()  # the shell's own read of "go"


# -- agreement with trace-cmd report

LINE = re.compile(r"^\s*(?P<comm>.*)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+(?P<s>\d+)\.(?P<ns>\d{9}):\s+"
                  r"(?P<event>[^:\s]+):\s+(?P<rest>.*)$")


def event_fields() -> dict[str, list[str]]:
    """Field names in declaration order, without the common ones, for every event of tracefs."""
    fields: dict[str, list[str]] = {}
    for fmt in TRACEFS.glob("events/*/*/format"):
        if fmt.parent.parent.name not in ("sched", "net", "sock", "tcp", "ftrace", "syscalls"):
            continue
        names = re.findall(r"field:[^;]*?([A-Za-z_][A-Za-z0-9_]*)(?:\[[^\]]*\])?;\s*offset",
                           fmt.read_text())
        fields[fmt.parent.name] = [n for n in names if not n.startswith("common_")]
    return fields


def same_value(theirs: str, mine: str) -> bool:
    if mine.startswith("0x"):  # pointers
        mine = str(int(mine, 16))
    if theirs.startswith("ARRAY["):
        return theirs[6:-1].replace(", ", "") == mine
    if re.fullmatch(r"(?:[0-9a-f]{2}){4,}", mine) and not theirs.startswith("ARRAY["):
        # trace-cmd prints some byte arrays as C strings (up to the first zero byte)
        if bytes.fromhex(mine).split(b"\0")[0].decode("latin-1") == theirs:
            return True
    if theirs == "(nil)":
        theirs = "0"
    try:
        if theirs.lower().startswith(("0x", "-0x")):
            return (int(theirs, 16) - int(mine, 10)) % 2**64 == 0
        if (int(theirs, 10) - int(mine, 10)) % 2**64 == 0:
            return True
    except ValueError:
        pass
    try:
        # libtraceevent prints some u64 fields (tcp_probe sock_cookie) in hex without 0x
        if re.fullmatch(r"[0-9a-f]+", theirs) and int(theirs, 16) == int(mine, 10):
            return True
    except ValueError:
        pass
    mine = re.sub(r"\\(x[0-9a-f]{2}|[tnr\\])", _unescape, mine)
    # a print event's text ends in a newline, which splits trace-cmd's output line
    return theirs == mine or theirs + "\n" == mine


def _unescape(m: re.Match) -> str:
    code = m.group(1)
    return chr(int(code[1:], 16)) if code[0] == "x" else {"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}[code]


@pytest.mark.privileged("tracefs")
def test_tsv_agrees_with_trace_cmd_report(build_dir: Path, tmp_path: Path, no_leftover: None) -> None:
    out = tmp_path / "raw"
    talk = ("import socket\n"
            "s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(1)\n"
            "c=socket.create_connection(s.getsockname()); a,_=s.accept()\n"
            "for i in range(50): c.sendall(b'x'*3000); a.recv(65536)\n"
            "c.close(); a.close(); s.close()\n")
    res = run([tool(build_dir), "-n", TAG, "-o", str(out), "--", sys.executable, "-c", talk])
    assert res.returncode == 0, res.stderr
    report = subprocess.run(["trace-cmd", "report", "-R", "-t", "-i", str(out / "trace.dat")],
                            capture_output=True, encoding="latin-1", timeout=TIMEOUT)
    assert report.returncode == 0, report.stderr
    lines = [ln for ln in report.stdout.splitlines() if ln.strip() and not ln.startswith("cpus=")]
    _, df = read_sched_tsv(out / "sched.tsv")
    _, columns, skip = read_header(out / "sched.tsv")
    text = pd.read_csv(out / "sched.tsv", sep="\t", skiprows=skip, names=columns, header=None, dtype=str,
                       keep_default_na=False, quoting=3, encoding="ascii")
    assert len(lines) == len(df) > 100
    fields = event_fields()
    seen = set()
    for i, line in enumerate(lines):
        m = LINE.match(line)
        assert m, line
        row = text.iloc[i]
        assert int(m["s"]) * 10**9 + int(m["ns"]) == int(row["t_ns"]), (line, dict(row))
        assert (int(m["cpu"]), int(m["pid"]), m["event"]) == (int(row["cpu"]), int(row["pid"]), row["event"])
        assert m["comm"] == "<...>" or m["comm"] == row["comm"], (line, row["comm"])
        names = fields[m["event"]]
        pattern = "^" + " ".join(f"{re.escape(n)}=(.*?)" for n in names) + "$"
        values = re.match(pattern, m["rest"], re.S)
        assert values, (names, m["rest"])
        for name, value in zip(names, values.groups()):
            col = f"arg_{name}" if name in ("t_ns", "cpu", "event", "pid", "comm") else name
            assert same_value(value, row[col]), (line, name, row[col])
        seen.add(m["event"])
    assert {"sched_switch", "sched_wakeup", "net_dev_xmit", "netif_receive_skb", "inet_sock_set_state",
            "print"} <= seen


# -- counts and loss

def wchan(pid: int) -> str:
    return Path(f"/proc/{pid}/wchan").read_text()


def switches(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return sum(int(v) for v in re.findall(r"^(?:non)?voluntary_ctxt_switches:\s+(\d+)", status, re.M))


def wait_in_pipe_read(pids: tuple[int, int]) -> None:
    import time
    for _ in range(2000):
        if all("pipe_read" in wchan(p) for p in pids):
            return
        time.sleep(0.005)
    pytest.fail(f"ping-pong processes did not block: {[wchan(p) for p in pids]}")


@pytest.mark.privileged("tracefs")
def test_conservation_under_overrun(build_dir: Path, tmp_path: Path, no_leftover: None) -> None:
    """A 4 KiB buffer, no drain, a switch flood: entries + overrun + read equals the number of
    switches the two ping-pong processes made, counted by the kernel's own per-task counters."""
    loops = 20000
    pp = subprocess.Popen([str(build_dir / "test" / "st-pingpong"), str(loops), "0"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    collector = None
    try:
        pids = tuple(int(x) for x in pp.stdout.readline().split()[1:3])
        wait_in_pipe_read(pids)
        before = sum(switches(p) for p in pids)
        flt = " || ".join(f"prev_pid == {p}" for p in pids)
        collector = start_collector([tool(build_dir), "-n", TAG, "-o", str(tmp_path / "raw"), "-b", "4", "--no-drain",
                                     "-e", "sched:sched_switch", "-f", f"sched:sched_switch={flt}"])
        pp.stdin.write("go\n")
        pp.stdin.flush()
        assert pp.stdout.readline().strip() == "done"
        wait_in_pipe_read(pids)
        generated = sum(switches(p) for p in pids) - before
        collector.send_signal(signal.SIGINT)
        _, err = collector.communicate(timeout=TIMEOUT)
        assert collector.returncode == 0, err
    finally:
        if collector and collector.poll() is None:
            collector.kill()
            collector.wait()
        pp.stdin.write("end\n")
        pp.stdin.close()
        pp.wait(timeout=TIMEOUT)
    summary = read_sched_json(tmp_path / "raw" / "sched.json")
    cpus = summary["buffers"][0]["cpus"]
    total = {k: sum(c["end"][k] - c["start"][k] for c in cpus) for k in ("entries", "overrun", "read_events")}
    assert generated >= 2 * loops
    assert total["overrun"] > 0
    markers = summary["buffers"][0]["markers_written"]  # the clock-check print events share the buffer
    assert markers == 8
    assert total["entries"] + total["overrun"] + total["read_events"] == generated + markers
    assert summary["buffers"][0]["lost_events"] == total["overrun"]
    _, df = read_sched_tsv(tmp_path / "raw" / "sched.tsv")
    assert len(df) == total["entries"]


@pytest.mark.privileged("tracefs")
def test_pingpong_switch_count(build_dir: Path, tmp_path: Path, no_leftover: None) -> None:
    """hw-bench pingpong --loops 100000 on one CPU: about 2 x 100000 switches of its two
    processes, none lost with the default buffer and the drain."""
    loops = 100000
    bench = build_dir / "bin" / "hw-bench"
    cmd = [str(bench), "pingpong", "--loops", str(loops), "--cpu", "0"] if bench.exists() else \
        ["sh", "-c", f"echo go | {build_dir / 'test' / 'st-pingpong'} {loops} 0 >/dev/null"]
    res = run([tool(build_dir), "-n", TAG, "-o", str(tmp_path), "--", *cmd])
    assert res.returncode == 0, res.stderr
    summary = read_sched_json(tmp_path / "sched.json")
    assert summary["command"]["exit_status"] == 0 or not bench.exists()
    assert summary["buffers"][0]["lost_events"] == 0
    _, df = read_sched_tsv(tmp_path / "sched.tsv")
    forks = df[df["event"] == "sched_process_fork"]
    if bench.exists():  # the command is the ping-pong parent (other hw-bench runs may be traced too)
        pids = {int(summary["command"]["pid"])}
    else:
        pids = set(df[(df["event"] == "sched_process_exec") & df["filename"].str.endswith("st-pingpong")]["arg_pid"])
    assert len(pids) == 1, pids
    # the first fork is the ping-pong partner (a sanitizer's leak checker may fork at exit)
    pids.add(forks[forks["parent_pid"].isin(pids)]["child_pid"].iloc[0])
    sw = df[(df["event"] == "sched_switch") & df["prev_pid"].isin(pids)]
    assert abs(len(sw) - 2 * loops) <= 0.01 * 2 * loops, len(sw)
    assert (df["comm"] != "").mean() > 0.99


# -- stopping

@pytest.mark.privileged("tracefs")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_and_removes_instance(build_dir: Path, tmp_path: Path, no_leftover: None,
                                           sig: signal.Signals) -> None:
    proc = start_collector([tool(build_dir), "-n", TAG, "-o", str(tmp_path), "-s"])
    mine = {n for n in instances() if n.startswith(f"hw-{proc.pid}-")}
    assert mine == {f"hw-{proc.pid}-{TAG}", f"hw-{proc.pid}-{TAG}-sys"}
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, err
    assert "events recorded; lost: overrun 0" in err
    assert not {n for n in instances() if n.startswith(f"hw-{proc.pid}-")}
    assert json.loads((tmp_path / "sched.json").read_text())["buffers"][0]["records"] > 0


@pytest.mark.privileged("tracefs")
def test_kill9_leftover_removed_by_doctor(build_dir: Path, tmp_path: Path, no_leftover: None) -> None:
    # Another program's `doctor --cleanup` may sweep the leftover first; then try again.
    for attempt in range(3):
        proc = start_collector([tool(build_dir), "-n", TAG, "-o", str(tmp_path / str(attempt))])
        name = f"hw-{proc.pid}-{TAG}"
        proc.kill()
        proc.communicate(timeout=TIMEOUT)
        assert name in instances()
        assert name in {p.name for p in doctor.stale_instances()}
        res = run([sys.executable, "-m", "hostwire", "doctor", "--cleanup"])
        assert res.returncode == 0
        assert name not in instances()
        if f"removed tracefs instance {name}" in res.stdout:
            return
    pytest.fail(f"doctor --cleanup never reported removing the leftover: {res.stdout}")


@pytest.mark.privileged("tracefs")
def test_refuses_a_live_instance(build_dir: Path, tmp_path: Path, no_leftover: None) -> None:
    """An instance with our own name exists (its owner, this very process, is alive): refuse it
    and leave it in place."""
    script = (f'mkdir {TRACEFS}/instances/hw-$$-{TAG} && exec {tool(build_dir)} -n {TAG} -o {tmp_path} '
              f'-- true; exit 9')
    proc = subprocess.Popen(["sh", "-c", script], stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=TIMEOUT)
    inst = TRACEFS / "instances" / f"hw-{proc.pid}-{TAG}"
    try:
        assert proc.returncode == 1, err
        assert f"failed to create tracefs instance hw-{proc.pid}-{TAG}: it exists already" in err
        assert inst.is_dir()
    finally:
        if inst.is_dir():
            inst.rmdir()


def trace_cmd_record(instance: str, args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    """trace-cmd record into its own instance (-B), in a private mount namespace where a scratch
    file covers the function-tracer files this kernel refuses to let trace-cmd write (see
    run_tracecmd in analyze/hostwire/overhead/tools.py)."""
    dummy = tmp_path / "ftrace-dummy"
    dummy.write_text("1\n")
    (TRACEFS / "instances" / instance).mkdir()
    files = ["/proc/sys/kernel/ftrace_enabled"] + [
        str(d / f) for d in (TRACEFS, TRACEFS / "instances" / instance)
        for f in ("set_ftrace_filter", "set_ftrace_notrace", "set_ftrace_pid", "set_ftrace_notrace_pid")]
    script = ('d=$1; shift; for f in ' + " ".join(files) + '; do [ -e "$f" ] && mount --bind "$d" "$f"; '
              'done; exec "$@"')
    try:
        return run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", str(dummy),
                    "trace-cmd", "record", "-q", "-B", instance, *args])
    finally:
        if (TRACEFS / "instances" / instance).is_dir():
            (TRACEFS / "instances" / instance).rmdir()


@pytest.mark.privileged("tracefs")
def test_converts_trace_cmd_v6_files(build_dir: Path, tmp_path: Path, no_leftover: None) -> None:
    """A trace.dat that trace-cmd record wrote (version 6, data in a -B buffer) converts to as
    many records, with the same stamps, as trace-cmd report shows."""
    dat = tmp_path / "tc.dat"
    res = trace_cmd_record(f"hw-{os.getpid()}-{TAG}", ["--file-version", "6", "-C", "mono",
                           "-e", "sched:sched_switch", "-e", "sched:sched_wakeup", "-o", str(dat),
                           "--", "sh", "-c", "sleep 0.05; sleep 0.05"], tmp_path)
    assert res.returncode == 0, res.stderr
    res = run([tool(build_dir), "convert", "-o", str(tmp_path), str(dat)])
    assert res.returncode == 0, res.stderr
    report = run(["trace-cmd", "report", "-t", "-i", str(dat)])
    stamps = [int(m[1]) * 10**9 + int(m[2]) for m in re.finditer(r"\] +(\d+)\.(\d{9}):", report.stdout)]
    _, df = read_sched_tsv(tmp_path / "sched.tsv")
    assert len(stamps) > 10 and df["t_ns"].tolist() == stamps
    assert set(df["event"]) == {"sched_switch", "sched_wakeup"}


# ---------------------------------------------------------------- /proc/schedtrace (no kernel needed)
# The patched kernel's ring (kernel-patches/) is faked by a directory holding a pre-filled
# "schedtrace" (a regular file reads to its end once, as an emptied ring does) and a
# "schedtrace_control" that collects the commands written to it (HW_SCHEDTRACE_PROC_DIR).

PROC_HEADER = "# schedtrace format=1 clock=mono size=4096 enabled=1 written=0 lost=0 pending=6\n"
PROC_LINES = [
    # out of time order, as the ring can be: the converter sorts by stamp
    "2000 1 switch prev_comm=my\\x20prog prev_pid=300 prev_tgid=299 prev_prio=120 prev_state=256 "
    "prev_runtime_ns=7000 prev_sigpending=0x4000 prev_user_ip=0x401000 preempt=1 next_comm=kworker/1:0 "
    "next_pid=40 next_tgid=40 next_prio=100 next_runtime_ns=9 next_vruntime=18446744073709551615 "
    "next_deadline=456 queue_vruntime=100 nr_running=3 cfs_queued=2 rt_running=1 net_backlog=5 tcp_mem_pages=-1\n",
    "1500 0 switch prev_comm=a\\x5cb\\x09c prev_pid=301 prev_tgid=301 prev_prio=139 prev_state=1 "
    "prev_runtime_ns=1 prev_sigpending=0x0 prev_user_ip=0x0 preempt=0 next_comm=swapper/0 next_pid=0 "
    "next_tgid=0 next_prio=120 next_runtime_ns=2 next_vruntime=3 next_deadline=4 queue_vruntime=5 "
    "nr_running=0 cfs_queued=0 rt_running=0 net_backlog=0 tcp_mem_pages=77\n",
    "1600 0 sys_enter pid=301 tid=302 nr=44 a0=0x4 a1=0x7fff0000 a2=0x5b4 a3=0x0 a4=0x0 a5=0x0\n",
    "1700 0 sys_exit pid=301 tid=302 nr=44 ret=1460\n",
    "1800 0 sys_enter pid=301 tid=302 nr=275 a0=0x5 a1=0x0 a2=0x6 a3=0x0 a4=0x10000 a5=0x0\n",
    "1900 0 sys_exit pid=301 tid=302 nr=275 ret=-11\n",
    "2100 0 sys_enter pid=301 tid=301 nr=3 a0=0xffffffff a1=0x0 a2=0x0 a3=0x0 a4=0x0 a5=0x0\n",
]
# by hand: columns t_ns cpu event pid comm, tracefs's sched_switch fields, then the ring's own
SCHED_ROWS = [
    ["1500", "0", "sched_switch", "301", "a\\\\b\\tc", "a\\\\b\\tc", "301", "139", "1", "swapper/0", "0", "120",
     "301", "1", "0x0", "0x0", "0", "0", "2", "3", "4", "5", "0", "0", "0", "0", "77"],
    ["2000", "1", "sched_switch", "300", "my prog", "my prog", "300", "120", "256", "kworker/1:0", "40", "100",
     "299", "7000", "0x4000", "0x401000", "1", "40", "9", "18446744073709551615", "456", "100", "3", "2", "1", "5",
     "-1"],
]
SYSCALL_ROWS = [  # sendto(4, .., 1460), splice(5, .., 6, .., 65536) = -EAGAIN, close(-1) unfinished at the end
    ["1600", "1700", "301", "302", "sendto", "4", "1460", "1460", "unknown", "", "0"],
    ["1800", "1900", "301", "302", "splice", "6", "65536", "-11", "unknown", "", "0"],
    ["2100", "2100", "301", "301", "close", "-1", "-1", "", "unknown", "", "1"],
]
PROC_CONTROL = "format 1\nenabled 0\nsize 4096\nwritten 9\nlost 2\npending 0\npids\n"
TRACEFS_SWITCH_FIELDS = ["prev_comm", "prev_pid", "prev_prio", "prev_state", "next_comm", "next_pid", "next_prio"]
PROC_EXTRA = ["prev_tgid", "prev_runtime_ns", "prev_sigpending", "prev_user_ip", "preempt", "next_tgid",
              "next_runtime_ns", "next_vruntime", "next_deadline", "queue_vruntime", "nr_running", "cfs_queued",
              "rt_running", "net_backlog", "tcp_mem_pages"]


def fake_proc(tmp_path: Path, lines: list[str], control: str = PROC_CONTROL) -> Path:
    d = tmp_path / "proc"
    d.mkdir()
    (d / "schedtrace").write_text(PROC_HEADER + "".join(lines))
    (d / "schedtrace_control").write_text(control)
    return d


def proc_env(fake: Path) -> dict[str, str]:
    return {**os.environ, "HW_SCHEDTRACE_PROC_DIR": str(fake)}


def commands(fake: Path, control: str = PROC_CONTROL) -> list[str]:
    """What hw-schedtrace wrote to the fake control file, one command per line."""
    return (fake / "schedtrace_control").read_text()[len(control):].splitlines()


def rows(path: Path) -> tuple[dict[str, str], list[str], list[list[str]], str]:
    """A TSV as (metadata, columns, records as text, last line)."""
    lines = path.read_text(encoding="ascii").splitlines()
    meta = dict(ln[2:].split(": ", 1) for ln in lines[:-1] if ln.startswith("# ") and ": " in ln)
    body = [ln for ln in lines if not ln.startswith("#")]
    return meta, body[0].split("\t"), [ln.split("\t") for ln in body[1:]], lines[-1]


@pytest.mark.sanitized
def test_proc_records_the_ring_into_the_tracefs_schema(build_dir: Path, tmp_path: Path) -> None:
    fake = fake_proc(tmp_path, PROC_LINES)
    out = tmp_path / "raw"
    res = run([tool(build_dir), "proc", "-o", str(out), "-b", "4096", "-s", "-p", str(os.getpid()), "--", "true"],
              env=proc_env(fake))
    assert res.returncode == 0, res.stderr
    assert res.stderr.splitlines()[0] == f"hw-schedtrace: recording from {fake}/schedtrace"
    summary = read_sched_json(out / "sched.json")
    child = summary["command"]["pid"]
    assert summary["command"]["exit_status"] == 0
    assert commands(fake) == ["size 4096", "clear", f"pids {os.getpid()} {child}", "enable", "disable"]
    # the lines as read; at the end, the header of a fresh open: the ring's state after the last read
    assert (out / "schedtrace.txt").read_text() == PROC_HEADER + "".join(PROC_LINES) + PROC_HEADER

    meta, columns, records, last = rows(out / "sched.tsv")
    assert (meta["format"], meta["source"], meta["trace_clock"], meta["backend"]) == \
        ("hostwire-tsv 2", "hw-schedtrace", "mono", "proc")
    assert meta["clock"].startswith("CLOCK_MONOTONIC")
    assert columns == ["t_ns", "cpu", "event", "pid", "comm", *TRACEFS_SWITCH_FIELDS, *PROC_EXTRA]
    assert records == SCHED_ROWS
    assert last == "# end: records=2"
    _, df = read_sched_tsv(out / "sched.tsv")
    assert df["next_vruntime"].dtype == "UInt64" and df["tcp_mem_pages"].tolist() == [77, -1]
    assert [int(v, 16) for v in df["prev_user_ip"]] == [0, 0x401000]  # addresses as 0x..., as tracefs's pointers
    assert df["comm"].tolist() == ["a\\\\b\\tc", "my prog"]  # escaped as every hostwire TSV text field

    meta, columns, records, last = rows(out / "syscalls.tsv")
    assert (meta["kind"], meta["backend"]) == ("syscalls", "proc")
    assert columns == ["t_enter_ns", "t_exit_ns", "pid", "tid", "call", "fd", "req_bytes", "result", "fd_kind",
                       "fd_desc", "unfinished"]
    assert records == SYSCALL_ROWS and last == "# end: records=3"
    from hostwire.read import syscalls
    if "proc" in syscalls.BACKENDS:  # the reader that takes this backend's files
        assert len(syscalls.read_syscalls(out / "syscalls.tsv")) == 3

    buf = summary["buffers"][0]
    assert (summary["format"], buf["name"], buf["backend"]) == ("hostwire-sched 1", "sched", "proc")
    assert (buf["records"], buf["ring_records"], buf["syscall_records"], buf["unfinished"]) == (2, 7, 3, 1)
    assert buf["pids"] == [os.getpid(), child] and buf["size"] == 4096 and buf["size_requested"] == 4096
    # the control file at stop: 2 records dropped by a full ring, 9 written, 7 read here: 2 taken by another reader
    assert (buf["lost"], buf["unread"], buf["lost_events"]) == (2, 2, 4)
    assert buf["cpus"] == [] and buf["records_by_cpu"] == {"0": 6, "1": 1}
    assert "lost: ring full 2, unread 2" in res.stderr
    # where the analysis counts a trace's losses (hostwire.record.collectors.Schedtrace.losses)
    from hostwire.record.collectors import TRACE_OVERRUNS, Schedtrace
    losses = Schedtrace(out, None).losses()[TRACE_OVERRUNS]
    assert losses["sched_lost_events"] == 4 and losses["sched_missed_in_stream"] == 0

    # proc convert of the raw file gives the same TSVs
    res = run([tool(build_dir), "proc", "convert", "-o", str(tmp_path / "again"), str(out / "schedtrace.txt")])
    assert res.returncode == 0, res.stderr
    for name in ("sched.tsv", "syscalls.tsv"):
        assert (tmp_path / "again" / name).read_bytes() == (out / name).read_bytes()
    # without the control file, the raw file's last header is of a running ring: unread is unknown
    again = read_sched_json(tmp_path / "again" / "sched.json")["buffers"][0]
    assert (again["lost"], again["unread"], again["lost_events"]) == (0, None, None)


@pytest.mark.sanitized
def test_proc_stops_on_sigint_and_records_switches_only(build_dir: Path, tmp_path: Path) -> None:
    fake = fake_proc(tmp_path, PROC_LINES[:2])
    out = tmp_path / "raw"
    proc = subprocess.Popen([tool(build_dir), "proc", "-o", str(out)], env=proc_env(fake),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr.readline().startswith("hw-schedtrace: recording from ")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:  # ours, by its pid
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert commands(fake) == ["clear", "pids", "enable", "disable"]  # no pids: no system calls
    assert not (out / "syscalls.tsv").exists()
    assert rows(out / "sched.tsv")[2] == SCHED_ROWS
    summary = read_sched_json(out / "sched.json")
    assert "command" not in summary and summary["buffers"][0]["syscalls_tsv"] is None


@pytest.mark.sanitized
def test_proc_duration_and_a_ring_in_use(build_dir: Path, tmp_path: Path) -> None:
    fake = fake_proc(tmp_path, PROC_LINES[:1])
    res = run([tool(build_dir), "proc", "-o", str(tmp_path / "raw"), "-d", "300ms"], env=proc_env(fake))
    assert res.returncode == 0, res.stderr
    summary = read_sched_json(tmp_path / "raw" / "sched.json")
    assert 0.3e9 <= summary["stop_mono_ns"] - summary["start_mono_ns"] < 10e9
    # another recording has the ring: refuse it, one line, nothing written to the control file
    control = PROC_CONTROL.replace("enabled 0", "enabled 1")
    (tmp_path / "busy").mkdir()
    busy = fake_proc(tmp_path / "busy", PROC_LINES[:1], control)
    res = run([tool(build_dir), "proc", "-o", str(tmp_path / "raw2"), "--", "true"], env=proc_env(busy))
    assert res.returncode == 1 and len(res.stderr.splitlines()) == 1, res.stderr
    assert "says the ring is enabled already" in res.stderr
    assert commands(busy, control) == []


@pytest.mark.sanitized
def test_proc_convert_keeps_the_records_before_a_cut(build_dir: Path, tmp_path: Path) -> None:
    raw = tmp_path / "schedtrace.txt"
    text = PROC_HEADER + "".join(PROC_LINES)
    raw.write_text(text[:-30])  # the last line cut
    res = run([tool(build_dir), "proc", "convert", "-o", str(tmp_path / "out"), str(raw)])
    assert res.returncode == 1
    assert res.stderr == (f"hw-schedtrace: failed to parse {raw}:8: expected a newline at the end of the line "
                          "(the file is cut)\n")
    _, _, records, last = rows(tmp_path / "out" / "sched.tsv")
    assert records == SCHED_ROWS
    assert last == f"# damaged: {raw}:8: expected a newline at the end of the line (the file is cut)"
    _, _, calls, last = rows(tmp_path / "out" / "syscalls.tsv")
    assert calls == SYSCALL_ROWS[:2] and last.startswith("# damaged: ")
    _, df = read_sched_tsv(tmp_path / "out" / "sched.tsv", keep_damaged=True)
    assert len(df) == 2 and "the writer marked the file damaged" in df.attrs["damage"]["message"]
    assert read_sched_json(tmp_path / "out" / "sched.json")["buffers"][0]["damaged"].endswith("(the file is cut)")
    # a malformed line: what was expected, where
    raw.write_text(text.replace("next_pid=40 ", "next_pid=4O "))
    res = run([tool(build_dir), "proc", "convert", "-o", str(tmp_path / "bad"), str(raw)])
    assert res.returncode == 1
    assert res.stderr == (f"hw-schedtrace: failed to parse {raw}:2: expected next_pid=<32-bit integer>, "
                          "got 'next_pid=4O'\n")
    assert rows(tmp_path / "bad" / "sched.tsv")[2] == []


@pytest.mark.sanitized
def test_proc_without_the_patch_is_one_line(build_dir: Path, tmp_path: Path) -> None:
    res = run([tool(build_dir), "proc", "-o", str(tmp_path / "raw"), "--", "true"],
              env=proc_env(tmp_path / "nothing"))
    assert res.returncode == 1
    assert res.stderr == (f"hw-schedtrace: {tmp_path}/nothing/schedtrace is missing: this kernel does not carry "
                          "the schedtrace patch (kernel-patches/)\n")
    assert not (tmp_path / "raw").exists()
    if not Path("/proc/schedtrace").exists():  # this host's kernel
        env = {k: v for k, v in os.environ.items() if k != "HW_SCHEDTRACE_PROC_DIR"}
        res = run([tool(build_dir), "proc", "-o", str(tmp_path / "raw"), "-d", "1"], env=env)
        assert res.returncode == 1
        assert res.stderr == ("hw-schedtrace: /proc/schedtrace is missing: this kernel does not carry the "
                              "schedtrace patch (kernel-patches/)\n")


@pytest.mark.sanitized
def test_proc_switch_line_gives_tracefs_sched_switch_columns_exactly(build_dir: Path, tmp_path: Path) -> None:
    """The tracefs-named columns of a switch record parse to exactly the values tracefs's
    sched_switch would give: names and order of its format file (where readable), integers as
    the kernel printed them (prev_state 256: preempted, TASK_REPORT_MAX), comm escaped as the
    tracefs writer escapes char arrays."""
    fmt = TRACEFS / "events" / "sched" / "sched_switch" / "format"
    try:
        names = re.findall(r"field:[^;]*?([A-Za-z_][A-Za-z0-9_]*)(?:\[[^\]]*\])?;\s*offset", fmt.read_text())
        assert [n for n in names if not n.startswith("common_")] == TRACEFS_SWITCH_FIELDS
    except OSError:
        pass  # no tracefs here: the documented list stands
    comms = {"x y": "x\\x20y", "tab\there": "tab\\x09here", "back\\slash": "back\\x5cslash", "é": "\\xc3\\xa9",
             "sixteen-bytes-ab": "sixteen-bytes-ab"}
    lines = []
    for i, (_, esc) in enumerate(comms.items()):
        lines.append(f"{100 + i} 2 switch prev_comm={esc} prev_pid={2**31 - 1} prev_tgid=1 prev_prio=-51 "
                     f"prev_state={[0, 1, 2, 256, 1026][i]} prev_runtime_ns=0 prev_sigpending=0x0 prev_user_ip=0x0 "
                     f"preempt=0 next_comm={esc} next_pid=0 next_tgid=0 next_prio=139 next_runtime_ns=0 "
                     f"next_vruntime=0 next_deadline=0 queue_vruntime=0 nr_running=0 cfs_queued=0 rt_running=0 "
                     f"net_backlog=0 tcp_mem_pages=0\n")
    raw = tmp_path / "schedtrace.txt"
    raw.write_text(PROC_HEADER + "".join(lines))
    res = run([tool(build_dir), "proc", "convert", "-o", str(tmp_path), str(raw)])
    assert res.returncode == 0, res.stderr
    meta, columns, records, _ = rows(tmp_path / "sched.tsv")
    kinds = dict(zip(columns, meta["column_types"].split()))
    assert [kinds[c] for c in TRACEFS_SWITCH_FIELDS] == ["str", "int", "int", "int", "str", "int", "int"]
    _, df = read_sched_tsv(tmp_path / "sched.tsv")
    for i, comm in enumerate(comms):
        row = df.iloc[i]
        escaped = comm.encode("utf-8").decode("latin-1")
        escaped = "".join(_tsv_escape(ch) for ch in escaped)
        assert (row["prev_comm"], row["next_comm"], row["comm"]) == (escaped, escaped, escaped), row
        assert (row["prev_pid"], row["prev_prio"], row["next_pid"], row["next_prio"]) == (2**31 - 1, -51, 0, 139)
        assert row["prev_state"] == [0, 1, 2, 256, 1026][i] and row["pid"] == 2**31 - 1
    # the timeline reads them as it reads tracefs's: preempted (256) and runnable (0) left runnable
    from hostwire.timeline.tables import switches
    assert switches(df)["prev_runnable"].tolist() == [True, False, False, True, False]


def _tsv_escape(ch: str) -> str:
    """The tracefs converter's text escaping (st_tsv_escape) of one byte given as a latin-1 char."""
    special = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\\": "\\\\"}
    if ch in special:
        return special[ch]
    return ch if 0x20 <= ord(ch) < 0x7f else f"\\x{ord(ch):02x}"


@pytest.mark.sanitized
def test_proc_help_and_usage_errors(build_dir: Path) -> None:
    res = run([tool(build_dir), "proc", "--help"])
    assert res.returncode == 0 and res.stderr == ""
    assert res.stdout.startswith("usage: hw-schedtrace proc [OPTIONS] [-- COMMAND [ARG...]]\n")
    assert "\nEXAMPLES\n" in res.stdout and "EXIT STATUS: 0 ok" in res.stdout
    assert re.search(r"^  -v, --verbose ", res.stdout, re.M) and re.search(r"^  -h, --help ", res.stdout, re.M)
    assert "hw-schedtrace proc" in run([tool(build_dir), "--help"]).stdout
    for args, expected in [
        (["proc", "-b", "100"], "hw-schedtrace: proc: failed to parse -b: expected an integer from 1024 to 16777216"),
        (["proc", "-p", "12"], "give --syscalls too"),
        (["proc", "--no-drain"], "hw-schedtrace: proc: unknown option '--no-drain'"),
        (["proc", "convert"], "hw-schedtrace: proc convert: needs one SCHEDTRACE.TXT"),
        (["proc", "convert", "a", "b"], "needs one SCHEDTRACE.TXT"),
    ]:
        res = run([tool(build_dir), *args])
        assert res.returncode == 2 and len(res.stderr.splitlines()) == 1, (args, res.stderr)
        assert expected in res.stderr, (args, res.stderr)
