"""One flag vocabulary across the five C tools (docs/cli.md): the same usage line, --help with
EXAMPLES and an EXIT STATUS line, one line and exit 2 for a bad option, one meaning per letter,
durations with units, and a -v that says more on stderr."""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import time
from pathlib import Path

import pytest

TIMEOUT = 60

# Every tool, and every subcommand, that has its own --help: (tool, subcommand or None).
COMMANDS = [("hw-bench", None), ("hw-bench", "main"), ("hw-bench", "receive"), ("hw-bench", "sieve"),
            ("hw-bench", "pingpong"), ("hw-bench", "mkdata"), ("hw-bench", "probes"), ("hw-schedtrace", None),
            ("hw-schedtrace", "convert"), ("hw-iotrace", None), ("hw-wirecap", None), ("hw-pcapcols", None)]
IDS = [f"{tool} {sub}" if sub else tool for tool, sub in COMMANDS]


def run(build_dir: Path, tool: str, *args: str, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(build_dir / "bin" / tool), *args], capture_output=True, text=True,
                          timeout=kw.pop("timeout", TIMEOUT), **kw)


def words(sub: str | None) -> list[str]:
    return [sub] if sub else []


def help_text(build_dir: Path, tool: str, sub: str | None) -> str:
    proc = run(build_dir, tool, *words(sub), "--help")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    return proc.stdout


@pytest.mark.sanitized
@pytest.mark.parametrize("tool, sub", COMMANDS, ids=IDS)
def test_help_has_the_usage_line_examples_and_exit_status(build_dir: Path, tool: str, sub: str | None) -> None:
    text = help_text(build_dir, tool, sub)
    first = text.splitlines()[0]
    assert re.fullmatch(rf"usage: {tool}( {sub})? \[OPTIONS\]( .*)?", first), first
    assert "\nEXAMPLES\n" in text
    assert re.search(r"^EXIT STATUS: 0 ok\b.*?1 runtime failure\b.*?2 usage error\.", text, re.M | re.S), text
    assert re.search(r"^  -h, --help ", text, re.M)
    if (tool, sub) != ("hw-bench", None):
        assert re.search(r"^  -v, --verbose ", text, re.M), "every tool takes -v"


@pytest.mark.sanitized
@pytest.mark.parametrize("tool, sub", COMMANDS, ids=IDS)
def test_a_bad_option_is_one_line_naming_the_tool_and_exit_2(build_dir: Path, tool: str, sub: str | None) -> None:
    where = f"{tool} {sub}" if sub else tool
    prefix = f"{tool}: {sub}: " if sub else f"{tool}: "
    proc = run(build_dir, tool, *words(sub), "--no-such-option")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == f"{prefix}unknown option '--no-such-option' (see '{where} --help')\n"
    proc = run(build_dir, tool, *words(sub), "-@")
    assert proc.returncode == 2 and proc.stderr == f"{prefix}unknown option '-@' (see '{where} --help')\n"


@pytest.mark.sanitized
@pytest.mark.parametrize("tool, args, option", [
    ("hw-bench", ["main", "-o", "x", "--duration", "soon"], "--duration"),
    ("hw-bench", ["main", "-o", "x", "-d", "3h"], "-d"),
    ("hw-schedtrace", ["-d", "-1"], "-d"),
    ("hw-iotrace", ["--duration", "2 s", "--", "true"], "--duration"),
    ("hw-wirecap", ["-i", "lo", "-o", "x.pcap", "-d", "fast"], "-d"),
])
def test_a_bad_duration_is_one_usage_line(build_dir: Path, tmp_path: Path, tool: str, args: list[str],
                                          option: str) -> None:
    proc = run(build_dir, tool, *args, cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith(f"{tool}: ") and f"failed to parse {option}: expected a duration" in proc.stderr
    assert proc.stderr.rstrip().endswith("--help')")


@pytest.mark.sanitized
def test_a_missing_value_and_a_bad_ready_fd_are_usage_errors(build_dir: Path, tmp_path: Path) -> None:
    proc = run(build_dir, "hw-wirecap", "-i", "lo", "-o")
    assert proc.returncode == 2
    assert proc.stderr == "hw-wirecap: option '-o' needs a value (see 'hw-wirecap --help')\n"
    for tool, args in (("hw-wirecap", ["-i", "lo", "-o", "x.pcap"]), ("hw-schedtrace", [])):
        proc = run(build_dir, tool, *args, "--ready-fd", "213", cwd=tmp_path)
        assert proc.returncode == 2
        assert proc.stderr == (f"{tool}: failed to parse --ready-fd: descriptor 213 is not open "
                               f"(see '{tool} --help')\n")


def test_each_letter_has_one_meaning_across_the_tools(build_dir: Path) -> None:
    meanings: dict[str, set[str]] = {}
    for tool, sub in COMMANDS:
        for letter, long in re.findall(r"^  -(\w), --([\w-]+)", help_text(build_dir, tool, sub), re.M):
            meanings.setdefault(letter, set()).add(long)
    assert {letter: names for letter, names in meanings.items() if len(names) > 1} == {}
    # the shared vocabulary, where a tool has the option at all
    for letter, long in {"o": "output", "d": "duration", "p": "pid", "v": "verbose", "h": "help"}.items():
        assert meanings[letter] == {long}


def test_output_says_file_or_dir(build_dir: Path) -> None:
    kinds = {}
    for tool, sub in COMMANDS:
        found = re.search(r"^  -o, --output (FILE|DIR)\b", help_text(build_dir, tool, sub), re.M)
        if found:
            kinds[f"{tool} {sub}" if sub else tool] = found.group(1)
    assert kinds == {"hw-bench main": "DIR", "hw-bench receive": "DIR", "hw-schedtrace": "DIR",
                     "hw-schedtrace convert": "DIR", "hw-iotrace": "FILE", "hw-wirecap": "FILE",
                     "hw-pcapcols": "DIR"}


# ---- durations with units, and -v ----------------------------------------------------------------

def bench_main(build_dir: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run(build_dir, "hw-bench", "main", "-o", str(out), "-M", "1", "-N", "1", "--log2", "12",
               "--warmup", "100ms", "--quiet", "100ms", *extra)


@pytest.mark.parametrize("duration", ["300ms", "0.3", "0.3s", "300000us"])
def test_hw_bench_main_takes_a_duration_with_a_unit(build_dir: Path, tmp_path: Path, duration: str) -> None:
    proc = bench_main(build_dir, tmp_path / "run", "-d", duration)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "run" / "bench.json").read_text())
    assert summary["window_end_ns"] - summary["window_start_ns"] == 300_000_000
    assert summary["config"]["warmup_ns"] == summary["config"]["quiet_ns"] == 100_000_000


def test_hw_bench_verbose_says_more(build_dir: Path, tmp_path: Path) -> None:
    plain = bench_main(build_dir, tmp_path / "a", "-d", "200ms")
    loud = bench_main(build_dir, tmp_path / "b", "-d", "200ms", "-v")
    assert plain.returncode == loud.returncode == 0
    assert plain.stderr == ""
    for needle in ("hw-bench: receiver (pid", "hw-bench: clock offset", "hw-bench: started send-0",
                   "hw-bench: started bg-0", "hw-bench: all 2 processes ended"):
        assert needle in loud.stderr
    # the receiver's own -v, through main's --receiver-cmd
    receiver = f"{build_dir / 'bin' / 'hw-bench'} receive -v -o {tmp_path / 'c'}"
    proc = bench_main(build_dir, tmp_path / "c", "-d", "200ms", "--receiver-cmd", receiver)
    assert proc.returncode == 0, proc.stderr
    assert "hw-bench: receiver: listening on 127.0.0.1" in proc.stderr
    assert "hw-bench: receiver: 1 connections served" in proc.stderr
    for args in (["sieve", "--log2", "10"], ["pingpong", "--loops", "100"], ["probes", "--calls", "100"],
                 ["mkdata", "--size", "1k", str(tmp_path / "d.txt")]):
        plain, loud = run(build_dir, "hw-bench", *args), run(build_dir, "hw-bench", *args, "-v")
        assert plain.returncode == loud.returncode == 0 and plain.stderr == ""
        assert loud.stderr.startswith(f"hw-bench: {args[0]}: "), loud.stderr
        keys = [[field.split("=")[0] for field in proc.stdout.split()] for proc in (plain, loud)]
        assert keys[0] == keys[1]  # stdout keeps its shape


def test_hw_iotrace_takes_a_duration_with_a_unit_and_verbose(build_dir: Path, tmp_path: Path) -> None:
    """The preload backend (no ptrace needed): -d 300ms ends the command as SIGTERM does."""
    started = time.monotonic()
    proc = run(build_dir, "hw-iotrace", "--preload", "-o", str(tmp_path / "s.tsv"), "-d", "300ms", "--",
               "sleep", "20")
    elapsed = time.monotonic() - started
    assert proc.returncode == 128 + 15, proc.stderr  # the command's status: SIGTERM
    assert 0.25 < elapsed < 5
    assert json.loads((tmp_path / "s.json").read_text())["backend"] == "preload"
    plain = run(build_dir, "hw-iotrace", "--preload", "-o", str(tmp_path / "t.tsv"), "--", "true")
    loud = run(build_dir, "hw-iotrace", "--preload", "-o", str(tmp_path / "t.tsv"), "-v", "--", "true")
    assert plain.returncode == loud.returncode == 0
    assert plain.stderr == ""
    assert "hw-iotrace: preload backend, running true" in loud.stderr
    assert "calls seen" in loud.stderr


def tiny_pcap(path: Path) -> Path:
    """One Ethernet frame with IPv4/UDP from 198.18.0.1 to 198.18.0.2."""
    udp = struct.pack(">HHHH", 5001, 9, 12, 0) + b"abcd"
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0, bytes([198, 18, 0, 1]),
                     bytes([198, 18, 0, 2])) + udp
    frame = b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00" + ip
    header = struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1)
    path.write_bytes(header + struct.pack("<IIII", 1, 500, len(frame), len(frame)) + frame)
    return path


def test_hw_pcapcols_verbose_says_more(build_dir: Path, tmp_path: Path) -> None:
    pcap = tiny_pcap(tmp_path / "one.pcap")
    plain = run(build_dir, "hw-pcapcols", str(pcap), "-o", str(tmp_path / "a"))
    loud = run(build_dir, "hw-pcapcols", "-v", str(pcap), "-o", str(tmp_path / "b"))
    assert plain.returncode == loud.returncode == 0
    assert plain.stderr == "" and loud.stderr == "hw-pcapcols: 1 frames, 1 rows, 1 part\n"


@pytest.mark.privileged()
def test_hw_wirecap_takes_a_duration_with_a_unit_and_verbose(build_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    started = time.monotonic()
    plain = run(build_dir, "hw-wirecap", "-i", "lo", "-o", str(tmp_path / "a" / "w.pcap"), "-d", "300ms")
    elapsed = time.monotonic() - started
    assert plain.returncode == 0, plain.stderr
    assert 0.25 < elapsed < 5
    meta = json.loads((tmp_path / "a" / "wirecap.json").read_text())
    assert meta["stop_reason"] == "duration"
    pair = meta["clock_pairs"]
    assert 250_000_000 < pair[1]["monotonic_ns"] - pair[0]["monotonic_ns"] < 2_000_000_000
    (tmp_path / "b").mkdir()
    loud = run(build_dir, "hw-wirecap", "-i", "lo", "-o", str(tmp_path / "b" / "w.pcap"), "-d", "0.3", "-v")
    assert loud.returncode == 0, loud.stderr
    assert len(loud.stderr.splitlines()) == len(plain.stderr.splitlines()) + 2
    assert "hw-wirecap: buffer 32768 KiB, immediate mode" in loud.stderr
    assert "hw-wirecap: stopped (duration)" in loud.stderr


@pytest.mark.privileged()
def test_hw_wirecap_says_ready_on_its_descriptor(build_dir: Path, tmp_path: Path) -> None:
    ready_r, ready_w = os.pipe()
    proc = subprocess.Popen([str(build_dir / "bin" / "hw-wirecap"), "-i", "lo", "-o", str(tmp_path / "w.pcap"),
                             "-d", "2s", "--ready-fd", str(ready_w)], pass_fds=(ready_w,),
                            stderr=subprocess.PIPE, text=True)
    os.close(ready_w)
    try:
        with os.fdopen(ready_r, "rb") as ready:
            assert ready.read() == b"ready\n"  # the line, then the end: the tool closed it
            assert proc.poll() is None  # while it still captures
        _, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and "capturing on lo" in err


@pytest.mark.privileged("tracefs")
def test_hw_schedtrace_takes_a_duration_with_a_unit_verbose_and_ready_fd(build_dir: Path, tmp_path: Path) -> None:
    tag = f"cli{os.getpid()}"
    ready_r, ready_w = os.pipe()
    started = time.monotonic()
    proc = subprocess.run([str(build_dir / "bin" / "hw-schedtrace"), "--name", tag, "-o", str(tmp_path / "a"),
                           "-d", "300ms", "--ready-fd", str(ready_w)], pass_fds=(ready_w,), capture_output=True,
                          text=True, timeout=TIMEOUT)
    elapsed = time.monotonic() - started
    os.close(ready_w)
    with os.fdopen(ready_r, "rb") as ready:
        assert ready.read() == b"ready\n"
    assert proc.returncode == 0, proc.stderr
    assert 0.25 < elapsed < 20
    meta = json.loads((tmp_path / "a" / "sched.json").read_text())
    assert 300_000_000 <= meta["stop_mono_ns"] - meta["start_mono_ns"] < 2_000_000_000
    loud = run(build_dir, "hw-schedtrace", "--name", tag, "-o", str(tmp_path / "b"), "-d", "0.3", "-v")
    assert loud.returncode == 0, loud.stderr
    assert len(loud.stderr.splitlines()) > len(proc.stderr.splitlines())
    assert re.search(rf"hw-schedtrace: hw-\d+-{tag}: \d+ events: sched:sched_switch", loud.stderr)
    plain = run(build_dir, "hw-schedtrace", "convert", "-o", str(tmp_path / "c"), str(tmp_path / "a" / "trace.dat"))
    loud = run(build_dir, "hw-schedtrace", "convert", "-v", "-o", str(tmp_path / "d"),
               str(tmp_path / "a" / "trace.dat"))
    assert plain.returncode == loud.returncode == 0
    assert len(plain.stderr.splitlines()) == 1
    assert re.search(r"^hw-schedtrace: cpu \d+: \d+ records, 0 missed in the stream$", loud.stderr, re.M)
    left = [p.name for p in Path("/sys/kernel/tracing/instances").glob(f"hw-*-{tag}*")]
    assert left == []
