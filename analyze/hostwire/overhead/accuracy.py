"""Does a collector change the answer? (the MSHN method, Jacobs 1999): one grid point recorded bare
and under each collector set, the sets' metrics compared run for run with the bare ones
(hostwire.stats.compare_sets)."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hostwire.errors import HostwireError
from hostwire.stats import ACCURACY_METRICS, compare_sets
from hostwire.timeline.ledger import loss_ledger

log = logging.getLogger(__name__)


def sieve_rounds_per_s(run_dir: Path) -> float:
    """Sieve rounds finished per second of the window, all background processes together (their
    logs raw/bench/bg-*.tsv, one record per round)."""
    from hostwire.run_directory import load_run

    run = load_run(run_dir)
    start, end = run.planned_window_ns()
    total = 0
    for path in sorted((run_dir / "raw" / "bench").glob("bg-*.tsv")):
        df = run.log(path.stem).df
        total += int(((df["t_ns"] >= start) & (df["t_ns"] < end)).sum())
    return total / ((end - start) / 1e9) if end > start else math.nan


def accuracy_row(run_dir: Path) -> dict[str, Any]:
    """The metrics compared for one run. Goodput and Jain's index on the receivers' basis (the
    same with and without a capture); IDC at 100 ms needs the wire (NaN without a capture)."""
    from hostwire.campaign.analyze import analyze_run

    row = analyze_run(run_dir, force=True)
    out = {"goodput_bit_s": row.get("goodput_app_bit_s", row.get("goodput_bit_s", math.nan)),
           "jain": row.get("jain", math.nan), "idc_100ms": row.get("idc_100ms", math.nan),
           "switches_per_s": row.get("switches_per_s", math.nan), "marked": row.get("marked", math.nan),
           "status": row.get("status")}
    try:
        out["sieve_rounds_per_s"] = sieve_rounds_per_s(run_dir)
    except HostwireError:
        out["sieve_rounds_per_s"] = math.nan
    return {k: (float(v) if isinstance(v, (int, float)) and v is not None else v) for k, v in out.items()}


def run_accuracy(root: Path, repeats: int, sets: Sequence[str], base_point: Any = None,
                 progress: Callable[[str], None] | None = None) -> tuple[dict[str, list[dict[str, Any]]],
                                                                            list[dict[str, Any]]]:
    """Records the grid point R times bare (collectors "none") and R times with each set, the sets
    alternating within each repetition, through hostwire.record.runner.record_run; returns the rows per
    set and compare_sets' table."""
    from dataclasses import replace

    from hostwire.record.point import RunPoint
    from hostwire.record.runner import record_run

    point = base_point or RunPoint()
    names = ["none", *sets]
    rows: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for r in range(repeats):
        for n in names:
            run_id = f"{n.replace('+', '-')}-r{r}"
            record_run(root, run_id, replace(point, collectors=n))
            rows[n].append(accuracy_row(root / run_id))
            try:
                flows, frames = loss_ledger(root / run_id)
                rows[n][-1]["ledger"] = {"flows": flows, "run": frames}
            except HostwireError as err:
                rows[n][-1]["ledger"] = {"flows": [], "run": {"note": str(err)}}
            if progress:
                progress(f"accuracy: {n} repetition {r + 1} of {repeats} recorded")
    table = compare_sets(rows)
    for row in table:
        row["repeats"] = repeats
        last = rows[row["collectors"]][-1].get("ledger") if rows[row["collectors"]] else None
        row["ledger"] = last if row["metric"] == ACCURACY_METRICS[0] else None
    return rows, table
