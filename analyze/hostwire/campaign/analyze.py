"""`hostwire analyze CAMPAIGN`: each run's metrics and tables, computed in parallel and cached in
the run directory (`metrics.json`, `tables/*.parquet`), and one row per run with every grid
parameter and metric in the campaign's `summary.parquet` and `summary.csv`.

The same function, `analyze_run`, runs on a local process pool or on a Dask distributed cluster (`--dask ADDRESS`);
a run's cache is valid only while the sha256 of every raw file and the manifest are those it recorded (metrics.json's
`sources`), the code that computes the row is the code that computed it (`code`: hostwire.code_digest of this module
and all it imports, so an upgrade recomputes) and the run's raw files match the digests in its manifest; a cache that
does not read back whole is recomputed with a warning."""

from __future__ import annotations

import json
import logging
import math
import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hostwire.campaign.repetitions import point_key, with_point_stats
from hostwire.code_digest import code_digest
from hostwire.safewrite import write_with
from hostwire.errors import HostwireError, InputError
from hostwire.lifeline import held_signals, pool_worker_init, sigterm_unwinds
from hostwire.manifest import seal, seal_holds, write_json_atomic
from hostwire.paths import require_utf8_name

log = logging.getLogger(__name__)

METRICS_FORMAT = "hostwire-metrics 5"  # the file's layout (5: `code`); what computed a row is its `code`
METRICS_FILE = "metrics.json"
TABLES = ("intervals_hist", "idc", "contract")
IDC_AT_NS = 100_000_000  # the bin length quoted in the summary (100 ms)


def run_directories(campaign: Path) -> list[Path]:
    """The campaign's run directories, complete or not (an attempt kept aside is left out, and so
    is a run a live runner is still recording: the runner renames it when it ends)."""
    require_utf8_name(campaign)
    if not campaign.is_dir():
        raise InputError(f"{campaign}: no such campaign directory")
    for p in campaign.iterdir():
        if p.is_dir() and (p / "manifest.json").exists():
            require_utf8_name(p)  # its name goes into summary.parquet's run_id
    runs = sorted(p for p in campaign.iterdir()
                  if p.is_dir() and not p.name.startswith(".") and (p / "manifest.json").exists()
                  and "partial-" not in p.name and p.name not in ("plots",))
    recording = [p for p in runs if _being_recorded(p)]
    if recording:
        log.warning("%s: %d run(s) still being recorded, left out: %s", campaign, len(recording),
                    ", ".join(p.name for p in recording))
        runs = [p for p in runs if p not in recording]
    if not runs:
        raise InputError(f"{campaign}: no run directories (no */manifest.json); record with 'hostwire run'")
    return runs


def _being_recorded(run_dir: Path) -> bool:
    from hostwire.manifest import effective_status

    try:
        manifest = json.loads((run_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        return not (run_dir / "manifest.json").exists()  # renamed away meanwhile: its runner is at work
    return isinstance(manifest, dict) and effective_status(manifest)[0] == "running"


def _table_path(run_dir: Path, name: str) -> Path:
    return run_dir / "tables" / f"{name}.parquet"


def cached_row(run: Any) -> dict[str, Any] | None:
    """The run's row from its cache, when the cache was made from the sources the run has now
    (Run.sources: every raw file's sha256 and the manifest) and no raw file differs from the
    digest its runner recorded; None otherwise. A cache that does not read back whole (metrics.json
    not JSON, a table whose digest differs or that Parquet cannot read) is named in a warning and
    recomputed."""
    run_dir = run.path
    path = run_dir / METRICS_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        log.warning("%s: damaged cache (%s); recomputed", path, err)
        return None
    if not isinstance(data, dict) or data.get("format") != METRICS_FORMAT:
        if not (isinstance(data, dict) and str(data.get("format", "")).startswith("hostwire-metrics ")):
            log.warning("%s: damaged cache (not a %s file); recomputed", path, METRICS_FORMAT)
        return None
    if not seal_holds(data):  # a flipped bit that still parses: a number of the row, a digest
        log.warning("%s: damaged cache (its content does not match its digest); recomputed", path)
        return None
    row, sources, tables = data.get("row"), data.get("sources"), data.get("tables")
    if not isinstance(row, dict) or not isinstance(sources, dict) or not isinstance(tables, dict):
        log.warning("%s: damaged cache (row, sources or tables missing); recomputed", path)
        return None
    if run.source_problems() or sources != run.sources() or data.get("code") != code_digest(__name__):
        return None
    from hostwire.manifest import file_digest

    for name in TABLES:
        table = _table_path(run_dir, name)
        recorded = tables.get(name)
        try:
            digest = file_digest(table)
            if not isinstance(recorded, dict) or digest != recorded.get("sha256"):
                raise ValueError("content differs from the sha256 in metrics.json")
            pd.read_parquet(table)
        except FileNotFoundError:
            log.warning("%s: cache incomplete (missing); recomputed", table)
            return None
        except Exception as err:  # noqa: BLE001 - whatever Parquet says of a damaged file
            log.warning("%s: damaged cache (%s); recomputed", table, str(err).splitlines()[0] if str(err) else err)
            return None
    return dict(row)


def analyze_run(run_dir: str | Path, force: bool = False) -> dict[str, Any]:
    """One run's summary row (grid parameters and metrics), from its cache when valid (see
    cached_row; `force` recomputes). Writes metrics.json and tables/*.parquet while holding the
    run directory's lock (hostwire.locks). Never raises for a damaged run: its row says why.
    Raises LockedError when the run is being recorded."""
    from hostwire.run_directory import load_run

    run_dir = Path(run_dir)
    with _run_lock(run_dir):
        run = load_run(run_dir)
        if not force:
            row = cached_row(run)
            if row is not None:
                return row
        row, tables = compute_row(run)
        digests: dict[str, dict[str, Any]] = {}
        from hostwire.manifest import file_digest

        for name in TABLES:
            table = tables.get(name)
            if table is None:
                table = pd.DataFrame()
            path = _table_path(run_dir, name)
            # the run folder and tables/ are not followed if symbolic links
            write_with(path, lambda handle, table=table: table.to_parquet(handle, index=False),
                       below=run_dir.parent, create=True)
            digests[name] = {"sha256": file_digest(path), "bytes": path.stat().st_size}
        write_json_atomic(run_dir / METRICS_FILE, seal({"format": METRICS_FORMAT, "row": row, "sources": run.sources(),
                                                        "code": code_digest(__name__), "tables": digests}))
        return row


@contextmanager
def _run_lock(run_dir: Path) -> Iterator[None]:
    """Holds the run directory's lock: raises LockedError at once when another process records
    into it, waits while another analysis computes it (its cache then serves)."""
    from hostwire.locks import LockedError, locked

    entered = False
    try:
        with locked(run_dir, "hostwire analyze"):
            entered = True
            yield
            return
    except LockedError as err:
        if entered or not err.what.startswith("hostwire analyze"):
            raise
    with locked(run_dir, "hostwire analyze", wait_s=600.0):
        yield


def _analyze_or_skip(run_dir: str, force: bool) -> dict[str, Any]:
    """analyze_run, or {"_skipped": why} for a run another process records (its lock is held)."""
    from hostwire.locks import LockedError

    try:
        return analyze_run(run_dir, force)
    except LockedError as err:
        return {"_skipped": f"{run_dir}: left out: {err}"}


def compute_row(run: Any) -> tuple[dict[str, Any], dict[str, pd.DataFrame]]:
    """The summary row and tables of one run: the run is opened once and every metric reads the
    same Run (its capture decoded once). A raw file missing or differing from the digest its
    runner recorded marks the run, named in `errors`."""
    from hostwire.metrics.chunked.engine import metrics_input
    from hostwire.metrics.compute import table as metric_table
    from hostwire.metrics.needs import needs_of
    from hostwire.run_directory import Run, load_run

    if not isinstance(run, Run):
        run = load_run(run)
    run_dir = run.path
    point = run.manifest.get("point", {})
    config = run.manifest.get("config", {})
    row: dict[str, Any] = {
        "run_id": run.manifest.get("run_id", run_dir.name),
        "directory": run_dir.name,
        "run_key": config.get("run_key"),
        "repetition": config.get("repetition", 0),
        "status": run.status,
        "reason": run.reason,
    }
    row.update({f"{k}": v for k, v in point.items()})
    row["point_key"] = point_key(point)  # the repetitions of one grid point share it (campaign.repetitions)
    guest = run.manifest.get("vm") or {}
    row["host_mode"] = "vm" if guest else "hosts" if run.manifest.get("hosts") else "netns"
    if run.manifest.get("hosts"):
        from hostwire.campaign.hosts_summary import hosts_row

        row.update(hosts_row(run.manifest))
    row["vm_kernel"] = guest.get("flavour", "")
    row["timing_emulated"] = int(bool(guest.get("emulated", False)))
    senders, background = int(point.get("senders", 0)), int(point.get("background", 0))
    row["mix"] = senders / (senders + background) if senders + background else math.nan
    tables: dict[str, pd.DataFrame] = {}
    errors: list[str] = []

    cannot: list[str] = []
    source = metrics_input(run)
    # A long kernel trace is read in slabs: its first pass leaves the Run only the trace's rare
    # events, which is all the run's streams, roles and calls (the receiver's clock) read of it.
    from hostwire.timeline import gap_sources

    with suppress(HostwireError):  # a damaged trace: kept with the Run, the gap causes say so
        gap_sources.long_trace(run)

    def table(kind: str, **options: Any) -> pd.DataFrame:
        return metric_table(kind, source, **options)

    def attempt(name: str, fn: Callable[[], None]) -> None:
        # A metric whose raw files the run does not have (a run recorded without a capture) is
        # left out and named, not counted as an error: the run lacks a source, it lost nothing.
        if not run.can(needs_of(name)):
            cannot.append(name)
            return
        try:
            fn()
        except HostwireError as err:
            errors.append(f"{name}: {err}")

    def sanity() -> None:
        t = table("sanity", partial=True)
        counters = dict(zip(t["counter"], t["value"]))
        row["marked"] = int(counters.get("marked", 1))
        for key in ("frames", "impossible_share", "tcp_retransmissions", "min_advertised_window",
                    "capture_drops", "trace_overruns", "tracer_misses", "log_overflows", "unclean_exits",
                    "failed_checks", "damaged_sources", "loss.qdisc_drops", "wire_busy_share"):
            if key in counters:
                row[key.replace("loss.", "")] = _number(counters[key])

    def goodput() -> None:
        t = table("goodput")
        total = t[t["stream"] == "all"].iloc[0]
        row["goodput_bit_s"] = float(total["bit_s"])
        for column in t.columns:
            if column not in ("stream", "bit_s", "bytes", "seconds") and column.endswith("bit_s"):
                row[f"goodput_{column}"] = _number(total[column])

    def fairness() -> None:
        t = table("fairness")
        row["jain"] = float(t["jain"].iloc[0])
        row["streams"] = int(t["n"].iloc[0])

    def intervals() -> None:
        t = table("intervals")
        for kind in ("frame", "write"):
            part = t[(t["kind"] == kind) & (t["stream"] == "all")]
            if len(part):
                row[f"{kind}_gap_p50_ns"] = _number(part["p50_ns"].iloc[0])
                row[f"{kind}_gap_p99_ns"] = _number(part["p99_ns"].iloc[0])
                row[f"{kind}_gap_max_ns"] = _number(part["max_ns"].iloc[0])
        tables["intervals_hist"] = table("intervals", hist=True)

    def idc() -> None:
        t = table("idc")
        tables["idc"] = t
        whole = t[t["stream"] == "all"]
        if len(whole):
            nearest = whole.iloc[int(np.argmin(np.abs(np.log(whole["t_ns"].to_numpy(float) / IDC_AT_NS))))]
            row["idc_100ms"] = float(nearest["idc"])

    def bursts() -> None:
        t = table("bursts")
        whole = t[t["stream"] == "all"] if "all" in set(t["stream"]) else t
        row["bursts"] = int(whole["bursts"].sum())
        row["on_off_ratio"] = _number(whole["on_off_ratio"].replace(np.inf, np.nan).mean())

    def contract() -> None:
        tables["contract"] = table("contract", points=20)

    def gap_causes() -> None:
        row.update(_gap_causes(run))

    if senders > 0:
        for name, fn in (("sanity", sanity), ("goodput", goodput), ("fairness", fairness),
                         ("intervals", intervals), ("idc", idc), ("bursts", bursts), ("contract", contract),
                         ("gaps", gap_causes)):
            attempt(name, fn)
    else:
        attempt("sanity", sanity)
    row.update(host_load(run))
    row.update(limit_columns(run, row))
    row.update(_receiver_clock(run))
    errors.extend(f"source: {problem}" for problem in run.source_problems())
    row["errors"] = "; ".join(errors)
    row["not_computed"] = ", ".join(cannot)  # metrics this run's sources cannot give
    if errors:
        row["marked"] = 1
    return row, tables


def _gap_causes(run: Any) -> dict[str, Any]:
    """The long gaps of the run's streams in its window (`hostwire gaps` with its default
    threshold, a long kernel trace read in slabs): how many, their total time, each cause's share
    of it, and the sources the run lacks to tell causes apart (docs/timeline.md, "Gaps")."""
    from hostwire.timeline import gap_sources, gap_tables

    sums = gap_tables.Totals()  # the sums alone: a long run's gaps are not held
    gap_sources.explain_run(run, run.window(), sums)
    total = sums.summary()
    out: dict[str, Any] = {"gaps": 0, "gap_time_ns": 0}
    whole = total[total["stream"] == "all"]
    if len(whole):
        out["gaps"], out["gap_time_ns"] = int(whole["gaps"].iloc[0]), int(whole["gap_ns"].iloc[0])
        for cause in gap_tables.SHARES:
            out[f"gap_{cause}_share"] = float(whole[f"{cause}_share"].iloc[0])
    out["gap_cannot_tell"] = " ".join(sums.cannot_tell)
    return out


def host_load(run: Any) -> dict[str, Any]:
    """Busy share of the sender's and the receiver's CPUs and the host's context switches per
    second, over the /proc samples that fall in the logging window."""
    try:
        from hostwire.read.resources import df_cpu_use

        use = df_cpu_use(run.df_resources())
        start, end = run.window_ns()
    except (HostwireError, KeyError, ValueError):
        return {}
    use = use[(use["t_start_ns"] >= start) & (use["t_end_ns"] <= end)]
    if len(use) == 0:
        return {}
    out: dict[str, Any] = {}
    for role, cpus in (("sender", run.point_value("sender_cpus")), ("receiver", run.point_value("receiver_cpus"))):
        try:
            from hostwire.units import parse_cpu_list

            part = use[use["cpu"].isin(parse_cpu_list(str(cpus)))]
        except HostwireError:
            continue
        out[f"{role}_cpu_busy"] = float(part["busy_share"].mean()) if len(part) else math.nan
    whole = use[use["cpu"] == -1]
    out["switches_per_s"] = float(whole["ctxt_per_s"].mean()) if len(whole) else math.nan
    return out


def limit_columns(run: Any, row: dict[str, Any]) -> dict[str, Any]:
    """What limited the run (hostwire.metrics.regime), with the figures it was decided from; the
    wire's rate and where it came from (hostwire.linkrate)."""
    from hostwire.linkrate import link_rate
    from hostwire.metrics.regime import limit_of, setup_label, throttled_share

    link = link_rate(run.manifest)
    capped = float(run.point_value("sender_cpu_share")) > 0
    throttled = throttled_share(run.manifest.get("cpu_cap"))
    return {"setup": setup_label(run.point), "cpu_throttled_share": throttled, "link_rate_bit_s": link.bit_s,
            "link_rate_source": link.source, "link_rate_enforced": int(link.enforced),
            "limit": limit_of(capped, throttled, row.get("sender_cpu_busy", math.nan),
                              row.get("wire_busy_share", math.nan))}


def _receiver_clock(run: Any) -> dict[str, Any]:
    """The receiver clock's fit (hostwire.timeline.clocks): offset, drift, and the bound the run's
    own traffic puts on the offset (DESIGN.md section 4), in the summary and metrics.json."""
    from hostwire.timeline.build import Timeline

    try:
        fit = Timeline.of(run).clock()
    except (HostwireError, KeyError, ValueError):
        return {}
    return {"clock_offset_ns": float(fit.offset_ns), "clock_drift_ppm": float(fit.drift_ppm),
            "clock_bound_ns": float(fit.bound_ns), "clock_method": str(fit.method)}


def _number(value: Any) -> Any:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return value
    return int(number) if number.is_integer() and abs(number) < 2**53 else number


def analyze_campaign(campaign: str | Path, *, workers: int | None = None, dask_address: str | None = None,
                     force: bool = False, progress: Callable[[int, int], None] | None = None) -> pd.DataFrame:
    """Analyzes every run of a campaign and writes summary.parquet and summary.csv."""
    campaign = Path(campaign)
    runs = run_directories(campaign)
    paths = [str(p) for p in runs]
    if dask_address:
        rows = _on_dask(dask_address, paths, force)
    else:
        with sigterm_unwinds():  # SIGTERM, as Ctrl-C, stops the pool's workers on the way out
            rows = list(_on_pool(paths, force, workers, progress))
    for row in rows:
        if "_skipped" in row:
            log.warning("%s", row["_skipped"])
    rows = [row for row in rows if "_skipped" not in row]
    if not rows:
        raise HostwireError(f"{campaign}: every run is locked by another process; nothing analysed")
    summary = pd.DataFrame(rows).sort_values(["senders", "background", "repetition", "run_id"],
                                             kind="stable").reset_index(drop=True)
    summary = with_point_stats(summary)
    write_with(campaign / "summary.parquet", lambda handle: summary.to_parquet(handle, index=False))
    write_with(campaign / "summary.csv", lambda handle: summary.to_csv(handle, index=False))
    return summary


def _on_pool(paths: list[str], force: bool, workers: int | None,
             progress: Callable[[int, int], None] | None) -> Iterable[dict[str, Any]]:
    workers = workers or min(len(paths), os.cpu_count() or 1)
    if workers <= 1:
        for i, path in enumerate(paths):
            yield _analyze_or_skip(path, force)
            if progress:
                progress(i + 1, len(paths))
        return
    # Workers are forked from this (the main) thread, and die with this process (pool_worker_init).
    pool = ProcessPoolExecutor(max_workers=workers, initializer=pool_worker_init, initargs=(os.getpid(),))
    try:
        # Submitted one by one, not through map(): map's iterator cancels the pending futures when
        # it is left, and the pool's own thread then fails on them (see _stop_workers).
        futures: list[Future[dict[str, Any]]] = []
        with held_signals():  # submitting forks the workers
            for path in paths:
                try:
                    futures.append(pool.submit(_analyze_or_skip, path, force))
                except BrokenProcessPool:  # a worker died while runs were still being handed out
                    break
        for i, path in enumerate(paths):
            if i == len(futures):
                raise _worker_died(path)
            try:
                row = futures[i].result()
            except BrokenProcessPool:
                raise _worker_died(path) from None
            yield row
            if progress:
                progress(i + 1, len(paths))
    except BaseException:  # Ctrl-C, SIGTERM, a failure: no worker goes on computing
        _stop_workers(pool)
        raise
    pool.shutdown(wait=True)


def _worker_died(path: str) -> HostwireError:
    return HostwireError(f"{path}: the worker analysing it died (killed by the kernel, out of memory?); the runs "
                         "analysed before are kept: rerun with fewer --workers")


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """SIGTERM to every worker of the pool (their tools follow by their parent-death signal), then
    the pool is shut down once they are gone, without waiting for work that will not be used.

    No future is cancelled: the pool's own thread fails every pending future once it sees its
    workers gone, and on Python before 3.11.9 it raises (and prints a traceback) when one of them
    was cancelled meanwhile. That thread is waited for: the pool's exit handler wakes every
    pool thread still listed, and one that closes its wake-up pipe at that moment made the
    handler print a traceback (EBADF) as hostwire exited."""
    workers = multiprocessing.active_children()
    for child in workers:
        child.terminate()
    for child in workers:
        child.join(timeout=2)
        if child.is_alive():
            child.kill()
            child.join(timeout=1)
    pool.shutdown(wait=True)  # its workers are dead: the thread fails what is pending and ends


def _on_dask(address: str, paths: list[str], force: bool) -> list[dict[str, Any]]:
    try:
        from distributed import Client
    except ImportError:
        raise HostwireError("--dask needs the 'distributed' package (make setup installs it)") from None
    try:
        client = Client(address, timeout="10s")
    except (OSError, TimeoutError) as err:
        raise HostwireError(f"--dask {address}: cannot reach the scheduler: {err}") from None
    with client:
        futures = client.map(_analyze_or_skip, paths, [force] * len(paths), pure=False)
        return list(client.gather(futures))
