"""What the tests of `hostwire record` share: a two-namespace topology without a shaper, the
recorder run inside the sender's namespace, the recorded run read back, and what the peers
(tshark, ps) see of the same run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

# how much slower than this machine the tests run: an emulated guest (tests/test_guest_qdiscs.py)
# runs the same tests with their waits scaled by it
SLOWDOWN = float(os.environ.get("HOSTWIRE_TEST_SLOWDOWN", "1"))

REPO = Path(__file__).resolve().parents[1]
SERVER = "198.18.0.2"


def hostwire_argv() -> list[str]:
    return [sys.executable, "-m", "hostwire"]


def env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO / "analyze"))


def in_netns(netns: str, argv: list[str]) -> list[str]:
    return ["ip", "netns", "exec", netns, *argv]


def record(netns: str, out: Path, command: list[str], *options: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`hostwire record -o OUT OPTIONS -- COMMAND` inside netns, to its end."""
    argv = in_netns(netns, [*hostwire_argv(), "record", "-o", str(out), *options, "--", *command])
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout * SLOWDOWN, env=env())


def server(netns: str, argv: list[str]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(in_netns(netns, argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def manifest(run: Path) -> dict[str, Any]:
    return json.loads((run / "manifest.json").read_text())


def tshark_flows(pcap: Path) -> pd.DataFrame:
    """Every directed TCP/UDP flow with payload as tshark sees it: proto, src, sport, dst, dport,
    frames, bytes."""
    fields = ["ip.src", "ipv6.src", "ip.dst", "ipv6.dst", "tcp.srcport", "tcp.dstport", "udp.srcport",
              "udp.dstport", "tcp.len", "udp.length"]
    proc = subprocess.run(["tshark", "-r", str(pcap), "-T", "fields", *sum((["-e", f] for f in fields), []),
                           "-E", "separator=\t", "-Y", "tcp.len > 0 or udp.length > 8"],
                          capture_output=True, text=True, timeout=300 * SLOWDOWN)
    assert proc.returncode == 0, proc.stderr
    rows = []
    for line in proc.stdout.splitlines():
        v = (line.split("\t") + [""] * len(fields))[:len(fields)]
        src, dst = v[0] or v[1], v[2] or v[3]
        if v[4]:
            rows.append(("tcp", src, int(v[4]), dst, int(v[5]), int(v[8])))
        elif v[6]:
            rows.append(("udp", src, int(v[6]), dst, int(v[7]), int(v[9]) - 8))
    df = pd.DataFrame(rows, columns=["proto", "src", "sport", "dst", "dport", "payload"])
    return df.groupby(["proto", "src", "sport", "dst", "dport"], as_index=False).agg(
        frames=("payload", "size"), bytes=("payload", "sum"))


def endpoint(addr: str, port: int) -> str:
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


def gaps_table(run: Path, *options: str, **environ: str) -> pd.DataFrame:
    import io

    proc = subprocess.run([*hostwire_argv(), "gaps", str(run), *options], capture_output=True, text=True, timeout=300 * SLOWDOWN,
                          env={**env(), **environ})
    assert proc.returncode == 0, (proc.returncode, proc.stderr)
    return pd.read_csv(io.StringIO(proc.stdout))


def left_behind(run_path: Path, pids: list[int]) -> list[str]:
    """Processes still alive that belong to this recording: the given pids, and any process whose
    command line or working directory names the run's directory (the collectors)."""
    left = [f"pid {p}" for p in pids if Path(f"/proc/{p}").exists() and not _zombie(p)]
    marks = (str(run_path), str(run_path) + ".partial")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if any(m in cmdline or cwd.startswith(m) for m in marks) and "pytest" not in cmdline:
            left.append(f"pid {entry.name}: {cmdline[:120]}")
    return left


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][:1] == "Z"
    except OSError:
        return True
