#!/usr/bin/env python3
"""How the chunked metrics' engine was chosen (docs/performance.md): the same two computations on
the same table of N data frames (20 streams, stamps 1.2114 ms apart, in Parquet) by DuckDB, by
Polars' streaming engine and by plain numpy passes over chunks (what hostwire.metrics.chunked
does), each in its own process, timed, its peak anonymous memory sampled (hostwire.procmem):
  idc: per stream and for 30 bin lengths t, the sums of N_k and N_k^2 over the bins;
  gaps: per stream the exact p1, p50, p90, p99 of the gaps between consecutive frames.
DuckDB and Polars are not hostwire's dependencies: run this with a Python that has them
(`python -m venv V && V/bin/pip install duckdb polars pyarrow numpy`), from the repository root.
Usage: perf/engines.py [--frames N] [--dir DIR]"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "analyze"))

STREAMS = 20
GAP_NS = 1_211_400
POINTS = 30


def write_table(path: Path, n: int) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("t_ns", pa.int64()), ("stream", pa.int32()), ("payload_len", pa.int64())])
    with pq.ParquetWriter(path, schema) as writer:
        for first in range(0, n, 1 << 20):
            i = np.arange(first, min(n, first + (1 << 20)), dtype=np.int64)
            writer.write_table(pa.table({"t_ns": i * GAP_NS, "stream": (i % STREAMS).astype(np.int32),
                                         "payload_len": np.full(len(i), 1448, np.int64)}, schema=schema))


def grid(n: int) -> list[int]:
    import numpy as np

    width = (n - 1) * GAP_NS
    return [int(t) for t in np.unique(np.floor(np.geomspace(1_000_000, width // 10, POINTS)).astype(np.int64))]


def run_duckdb(path: Path, job: str, n: int) -> None:
    import duckdb

    con = duckdb.connect()
    con.execute("SET memory_limit = '1GB'")
    con.execute("SET threads = 2")
    con.execute(f"SET temp_directory = '{path.parent / 'duckdb.tmp'}'")
    if job == "idc":
        for t in grid(n):
            con.execute(f"""SELECT stream, sum(c), sum(c * c) FROM (
                SELECT stream, t_ns // {t} AS b, count(*)::BIGINT AS c FROM '{path}' GROUP BY stream, b)
                GROUP BY stream""").fetchall()
    else:
        con.execute(f"""SELECT stream, quantile_cont(g, [0.01, 0.5, 0.9, 0.99]) FROM (
            SELECT stream, t_ns - lag(t_ns) OVER (PARTITION BY stream ORDER BY t_ns) AS g FROM '{path}')
            WHERE g IS NOT NULL GROUP BY stream""").fetchall()


def run_polars(path: Path, job: str, n: int) -> None:
    import polars as pl

    scan = pl.scan_parquet(path)
    if job == "idc":
        for t in grid(n):
            (scan.group_by(["stream", (pl.col("t_ns") // t).alias("b")]).agg(pl.len().cast(pl.Int64).alias("c"))
             .group_by("stream").agg(pl.col("c").sum().alias("s1"), (pl.col("c") * pl.col("c")).sum().alias("s2"))
             .collect(engine="streaming"))
    else:
        (scan.sort("stream", "t_ns").with_columns(pl.col("t_ns").diff().over("stream").alias("g"))
         .drop_nulls("g").group_by("stream")
         .agg([pl.col("g").quantile(q, interpolation="linear").alias(str(q)) for q in (0.01, 0.5, 0.9, 0.99)])
         .collect(engine="streaming"))


def run_numpy(path: Path, job: str, n: int) -> None:
    import numpy as np
    import pyarrow.parquet as pq

    from hostwire.metrics.chunked import idc, intervals
    from hostwire.window import Window

    names = [f"s{i:02d}" for i in range(STREAMS)]
    window = Window(0, (n - 1) * GAP_NS)

    def chunks():  # type: ignore[no-untyped-def]
        for batch in pq.ParquetFile(path).iter_batches(batch_size=1 << 20):
            yield {"t_ns": batch.column(0).to_numpy(), "stream": batch.column(1).to_numpy().astype(np.int64),
                   "payload_len": batch.column(2).to_numpy()}

    if job == "idc":
        idc.df_idc(chunks(), names, window, np.asarray(grid(n)), aggregate=False)
    else:
        intervals.df_intervals(chunks, names, window)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=30_000_000)
    parser.add_argument("--dir", type=Path, default=Path(os.environ.get("HOSTWIRE_BENCH_DIR", "/var/tmp")))
    parser.add_argument("--child", nargs=3, metavar=("ENGINE", "JOB", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        engine, job, path = args.child
        {"duckdb": run_duckdb, "polars": run_polars, "numpy": run_numpy}[engine](Path(path), job, args.frames)
        return 0
    from hostwire.procmem import Sampler

    with tempfile.TemporaryDirectory(prefix="hostwire-engines-", dir=args.dir) as work:
        path = Path(work) / "frames.parquet"
        write_table(path, args.frames)
        print(f"{'engine':<8} {'job':<6} {'s':>7} {'cpu s':>7} {'M frames/s':>10} {'M fr/cpu s':>10} {'peak MB':>8}")
        for job in ("idc", "gaps"):
            for engine in ("numpy", "duckdb", "polars"):
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                proc = subprocess.Popen([sys.executable, __file__, "--frames", str(args.frames),
                                         "--child", engine, job, str(path)], cwd=REPO, stderr=subprocess.PIPE)
                with Sampler([proc.pid]) as sampler:
                    _, err = proc.communicate()
                seconds = time.perf_counter() - t0
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
                note = "" if proc.returncode == 0 else f"  failed: {err.decode(errors='replace').strip().splitlines()[-1]}"
                print(f"{engine:<8} {job:<6} {seconds:>7.2f} {cpu:>7.2f} {args.frames / seconds / 1e6:>10.2f} "
                      f"{args.frames / max(cpu, 1e-9) / 1e6:>10.2f} {sampler.peak / 1e6:>8.0f}{note}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
