"""raw/resources.tsv: /proc/stat parsing and the shares per interval against hand-computed cases,
and the sampler on the real /proc/stat while a known load runs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hostwire.errors import InputError
from hostwire.read.resources import COLUMNS, df_cpu_use, parse_proc_stat, read_resources
from hostwire.record.resources import ResourceSampler

PROC_STAT = """cpu  100 2 30 400 5 6 7 8 0 0
cpu0 60 1 20 150 3 4 5 6 0 0
cpu1 40 1 10 250 2 2 2 2 0 0
intr 12345 1 2 3
ctxt 987654
btime 1700000000
processes 4321
procs_running 3
procs_blocked 1
softirq 55 1 2
"""


def test_parse_proc_stat_in_ns() -> None:
    cpus, system = parse_proc_stat(PROC_STAT, tick_ns=10_000_000)
    assert [c for c, _ in cpus] == [-1, 0, 1]
    assert cpus[1][1] == [600_000_000, 10_000_000, 200_000_000, 1_500_000_000, 30_000_000, 40_000_000,
                          50_000_000, 60_000_000]
    assert system == {"ctxt": 987654, "procs_running": 3, "procs_blocked": 1}
    # an old kernel's line without iowait .. steal: the missing fields count 0
    old, _ = parse_proc_stat("cpu0 1 2 3 4\n", tick_ns=1)
    assert old == [(0, [1, 2, 3, 4, 0, 0, 0, 0])]


def samples(rows: list[tuple[int, int, list[int], int]]) -> pd.DataFrame:
    """(t_ns, cpu, ticks of user..steal, ctxt) -> a resources table (1 tick = 1 ms)."""
    data = [[t, cpu, *(v * 10**6 for v in ticks), ctxt, 1, 0] for t, cpu, ticks, ctxt in rows]
    return pd.DataFrame(data, columns=list(COLUMNS))


def test_shares_per_interval_hand_computed() -> None:
    df = samples([
        (0, 0, [10, 0, 5, 100, 0, 0, 0, 0], 1000),
        (0, 1, [0, 0, 0, 115, 0, 0, 0, 0], 1000),
        # +30 user, +10 nice, +10 system, +10 idle, +5 irq, +5 softirq, +15 steal
        (100_000_000, 0, [40, 10, 15, 110, 0, 5, 5, 15], 6000),
        (100_000_000, 1, [0, 0, 0, 215, 0, 0, 0, 0], 6000),      # idle throughout
        (150_000_000, 0, [40, 10, 15, 160, 0, 5, 5, 15], 6500),   # idle throughout
        (150_000_000, 1, [50, 0, 0, 215, 0, 0, 0, 0], 6500),      # busy throughout
    ])
    use = df_cpu_use(df).set_index(["cpu", "t_end_ns"])
    assert len(use) == 4
    first = use.loc[(0, 100_000_000)]
    assert first["busy_share"] == pytest.approx(60 / 85)  # (30 + 10 + 10 + 5 + 5) of 85 ticks
    assert first["steal_share"] == pytest.approx(15 / 85)
    assert first["t_start_ns"] == 0 and first["ctxt_per_s"] == pytest.approx(5000 / 0.1)
    assert use.loc[(1, 100_000_000), "busy_share"] == 0.0
    assert use.loc[(0, 150_000_000), "busy_share"] == 0.0
    assert use.loc[(1, 150_000_000), "busy_share"] == 1.0
    assert use.loc[(1, 150_000_000), "ctxt_per_s"] == pytest.approx(500 / 0.05)


def test_sampler_sees_a_cpu_kept_busy(tmp_path: Path) -> None:
    """A loop pinned to CPU 0 for 1.5 s: over those intervals CPU 0 is hardly ever idle."""
    path = tmp_path / "resources.tsv"
    sampler = ResourceSampler(path, interval_s=0.05)
    sampler.start()
    try:
        time.sleep(0.2)
        t0 = time.monotonic_ns()
        subprocess.run(["taskset", "-c", "0", sys.executable, "-c",
                        "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 1.5: pass"],
                       check=True, timeout=60)
        t1 = time.monotonic_ns()
    finally:
        info = sampler.stop()
    df = read_resources(path)
    assert info["samples"] == df["t_ns"].nunique() and info["errors"] == 0
    assert 20 <= info["samples"] <= 60  # 1.7 s at 50 ms, plus the first and last
    assert set(df["cpu"]) == {-1, *range(os.cpu_count() or 1)}
    assert (df.groupby("cpu")["t_ns"].diff().dropna() > 0).all()
    for name in ("user_ns", "idle_ns", "ctxt"):  # cumulative counters never go back
        assert (df.groupby("cpu")[name].diff().dropna() >= 0).all()
    use = df_cpu_use(df)
    during = use[(use["cpu"] == 0) & (use["t_start_ns"] >= t0) & (use["t_end_ns"] <= t1)]
    assert len(during) >= 20
    idle_share = 1 - during["busy_share"] - during["steal_share"]
    assert float(idle_share.mean()) < 0.15, during


def test_iowait_that_falls_is_read_and_counts_no_negative_time(tmp_path: Path) -> None:
    """The kernel may lower a CPU's iowait between two reads (it revises the idle/iowait split):
    seen in a real run, 126.63 s then 126.62 s. The file is whole; the interval's shares stay in
    [0, 1]; a user time that falls is still refused."""
    def row(t: int, user: int, iowait: int) -> str:
        values = [t, 0, user, 0, 0, 10_000_000_000, iowait, 0, 0, 0, 0, 0, 0]
        return "\t".join(map(str, values)) + "\n"
    head = "# format: hostwire-tsv 1\n# kind: resources\n" + "\t".join(COLUMNS) + "\n"
    path = tmp_path / "resources.tsv"
    path.write_text(head + row(0, 0, 126_630_000_000) + row(100_000_000, 50_000_000, 126_620_000_000))
    use = df_cpu_use(read_resources(path))
    assert use["busy_share"].iloc[0] == 1.0  # 50 ms busy, no idle time added, none taken away
    path.write_text(head + row(0, 50_000_000, 0) + row(100_000_000, 40_000_000, 0))
    with pytest.raises(InputError, match="data line 2: user_ns 40000000 is below the CPU's previous sample"):
        read_resources(path)


def test_reader_errors_name_the_file(tmp_path: Path) -> None:
    wrong = tmp_path / "sched.tsv"
    wrong.write_text("# format: hostwire-tsv 1\n# kind: sched\n" + "\t".join(COLUMNS) + "\n")
    with pytest.raises(InputError, match="sched.tsv: '# kind: sched', expected 'resources'"):
        read_resources(wrong)
    bad = tmp_path / "resources.tsv"
    bad.write_text("# format: hostwire-tsv 1\n# kind: resources\n" + "\t".join(COLUMNS) + "\n"
                   + "\t".join(["1", "0", "x"] + ["0"] * (len(COLUMNS) - 3)) + "\n")
    with pytest.raises(InputError, match="resources.tsv: expected integers"):
        read_resources(bad)
    with pytest.raises(ValueError, match="interval_s"):
        ResourceSampler(tmp_path / "r.tsv", interval_s=0)
    assert np.isnan(df_cpu_use(samples([(0, 0, [0] * 8, 0), (10, 0, [0] * 8, 0)]))["busy_share"].iloc[0])
