"""Does other work on the host, even work that only runs when nothing else can, change what the
senders do with their CPU? Points of diff-noise.toml (5 % quota, no shaper, 10 s window), each
recorded five times on a quiet host, then five times beside a neighbour, each pair compared by
hostwire diff. The neighbours:
- stream: a process at nice 19 that streams through a 128 MiB array (as a niced analysis does);
- spin: on every CPU a SCHED_IDLE busy loop (chrt --idle), which runs only when the CPU would
  otherwise idle, so that the virtual CPUs never halt.

  sudo .venv/bin/python perf/neighbour_effect.py OUT_DIR stream|spin [M:N ...]   (default 20:10)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HOSTWIRE = [sys.executable, "-m", "hostwire"]
CONFIG = Path(__file__).resolve().parents[1] / "configs" / "diff-noise.toml"
STREAM = "import numpy as np\na = np.ones(1 << 24)\nwhile True:\n    a += 1.0\n"
SPIN = "while True:\n    pass\n"


def record(out: Path, senders: int, background: int) -> None:
    # the config's grid narrowed to one point by --set, with the config's five repetitions
    subprocess.run([*HOSTWIRE, "run", str(CONFIG), "--out", str(out), "--no-progress",
                    "--set", f"senders={senders}", "--set", f"background={background}"], check=True)


def start(kind: str) -> list[subprocess.Popen[bytes]]:
    if kind == "stream":
        return [subprocess.Popen(["nice", "-n", "19", sys.executable, "-c", STREAM])]
    return [subprocess.Popen(["chrt", "--idle", "0", "taskset", "-c", str(cpu), sys.executable, "-c", SPIN])
            for cpu in range(os.cpu_count() or 1)]


def main() -> int:
    out, kind = Path(sys.argv[1]), sys.argv[2]
    points = [tuple(int(x) for x in p.split(":")) for p in sys.argv[3:]] or [(20, 10)]
    for m, n in points:
        record(out / f"M{m}-N{n}-quiet", m, n)
        neighbours = start(kind)
        try:
            record(out / f"M{m}-N{n}-{kind}", m, n)
        finally:
            for p in neighbours:
                p.terminate()
                p.wait()
        subprocess.run([*HOSTWIRE, "diff", str(out / f"M{m}-N{n}-quiet"), str(out / f"M{m}-N{n}-{kind}")], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
