"""hw-schedtrace on the live kernel: each test records in its own tracefs instance (hw-<pid>...),
under a timeout, and checks that no instance is left behind (against trace-cmd:
test_schedtrace_tracecmd.py)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from hostwire.record import doctor
from hostwire.read.sched import read_sched_json, read_sched_tsv
from hostwire.read.tsv import read_header

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this file (importlib mode)
# no_leftover is a fixture: pytest finds it here by its name
from schedtrace_helpers import (TAG, TIMEOUT, TRACEFS, instances, no_leftover, run,  # noqa: E402,F401
                                start_collector, tool)


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


@pytest.mark.privileged("tracefs")
def test_switch_ext_on_a_kernel_without_it_is_one_line(build_dir: Path, tmp_path: Path, no_leftover: None) -> None:
    """custom:sched_switch_ext_tp exists only in a kernel built with the sched_switch_ext series
    (kernel-patches/; the guest tests record it): elsewhere --switch-ext is one line, exit 1."""
    if Path("/sys/kernel/tracing/events/custom/sched_switch_ext_tp").exists():
        pytest.skip("this kernel has custom:sched_switch_ext_tp")
    res = run([tool(build_dir), "-o", str(tmp_path / "raw"), "--switch-ext", "-d", "100ms"])
    assert res.returncode == 1 and len(res.stderr.splitlines()) == 1, res.stderr
    assert res.stderr == ("hw-schedtrace: failed to find event custom:sched_switch_ext_tp: this kernel was not "
                          "built with CONFIG_SCHED_SWITCH_EXT_EVENT (the sched_switch_ext series, kernel-patches/)\n")
    assert "-x, --switch-ext" in run([tool(build_dir), "--help"]).stdout
