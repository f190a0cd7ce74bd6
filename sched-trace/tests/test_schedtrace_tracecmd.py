"""hw-schedtrace against trace-cmd on the live kernel: its TSV agrees with trace-cmd report event
for event, field for field, and it converts trace-cmd's own v6 files."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from hostwire.read.sched import read_sched_tsv
from hostwire.read.tsv import read_header

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this file (importlib mode)
# no_leftover is a fixture: pytest finds it here by its name
from schedtrace_helpers import TAG, TIMEOUT, TRACEFS, no_leftover, run, tool  # noqa: E402,F401


LINE = re.compile(r"^\s*(?P<comm>.*)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+(?P<s>\d+)\.(?P<ns>\d{9}):\s+"
                  r"(?P<event>[^:\s]+):\s+(?P<rest>.*)$")


def event_fields() -> dict[str, list[str]]:
    """Field names in declaration order, without the common ones, for every event of tracefs."""
    fields: dict[str, list[str]] = {}
    for fmt in TRACEFS.glob("events/*/*/format"):
        if fmt.parent.parent.name not in ("sched", "net", "sock", "tcp", "ftrace", "syscalls", "irq"):
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


# ---------------------------------------------------------------- --switch-ext
