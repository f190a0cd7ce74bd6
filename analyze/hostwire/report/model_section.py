"""The campaign report's section "The model against the runs": model.parquet (hostwire model)
as a table of predicted beside measured figures per run, the verdict, and a figure of predicted
against measured goodput with the 10 % band. The report only reads what `hostwire model` wrote:
calibrating records runs, which a report must never do."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hostwire.report.figure import HEIGHT, WIDTH, log_axis, new_figure
from hostwire.report.plots import LIMIT_STYLE
from hostwire.model.validate import WITHIN_PCT, summary_lines

COLUMNS = {"senders": "M", "background": "N", "setup": "set-up", "limit": "measured limit",
           "regime_model": "model regime", "goodput_mbps": "goodput Mbit/s", "goodput_model_mbps": "model",
           "goodput_error_pct": "error %", "jain": "Jain", "jain_model": "model ", "jain_error_pct": "error % ",
           "cpu_wait_share": "CPU wait", "cpu_wait_model": "model  ", "flags": "flags"}


def read_model_table(campaign: Path) -> pd.DataFrame | None:
    path = campaign / "model.parquet"
    if not path.exists():
        return None
    try:
        return pd.read_parquet(path)
    except (OSError, ValueError):
        return None


def section_text(table: pd.DataFrame | None, campaign: Path) -> tuple[str, pd.DataFrame | None, pd.Series | None]:
    """The section's paragraphs, its table (already renamed) and the rows to mark (beyond 10 %)."""
    if table is None:
        return (f"<p>Not modelled yet: <code>hostwire model {html.escape(str(campaign))}</code> calibrates on this "
                "host (short runs of its own), predicts every point and writes model.parquet (docs/model.md).</p>",
                None, None)
    verdict = "".join(f"<li>{html.escape(line.strip())}</li>" for line in summary_lines(table))
    intro = ("<p>The layered model of docs/model.md (the senders' weighted share of the quota, the wire at its "
             "rate, TCP's windows as the loop's population, solved by exact MVA) predicts each point from "
             "calibration runs that are not among these points. Rows beyond "
             f"{WITHIN_PCT:g} % in goodput or Jain's index are marked. Where the model fails, the measured and the "
             "predicted figures stand side by side here; <code>deep-fifo</code> marks points where windows of "
             f"unequal size share a deep shaper queue, whose index the model does not tell.</p><ul>{verdict}</ul>")
    shown = table.sort_values(["setup", "senders", "background"])
    bad = (shown["goodput_error_pct"].abs() > WITHIN_PCT) | (shown["jain_error_pct"].abs() > WITHIN_PCT)
    classes = bad.map({True: "bad", False: ""}).reset_index(drop=True)
    return intro, shown[[c for c in COLUMNS if c in shown]].rename(columns=COLUMNS), classes


def plot_predicted_against_measured(table: pd.DataFrame) -> Any:
    fig, ax = new_figure(WIDTH, HEIGHT)
    measured, model = table["goodput_mbps"].to_numpy(float), table["goodput_model_mbps"].to_numpy(float)
    finite = np.isfinite(measured) & np.isfinite(model) & (measured > 0) & (model > 0)
    if finite.any():
        lo, hi = min(measured[finite].min(), model[finite].min()) / 1.3, max(measured[finite].max(), model[finite].max()) * 1.3
        line = np.array([lo, hi])
        ax.plot(line, line, color="black", linewidth=0.8, label="model = measured")
        ax.fill_between(line, line / (1 + WITHIN_PCT / 100), line * (1 + WITHIN_PCT / 100), color="0.85",
                        label=f"within {WITHIN_PCT:g} %")
    for regime, group in table[finite].groupby("regime_model"):
        colour, label = LIMIT_STYLE.get(str(regime), ("tab:gray", str(regime)))
        ax.scatter(group["goodput_mbps"], group["goodput_model_mbps"], s=14, color=colour, label=f"model: {label}")
    ax.set_xscale("log"), ax.set_yscale("log")
    log_axis(ax.xaxis), log_axis(ax.yaxis)
    ax.set_xlabel("measured goodput (Mbit/s)"), ax.set_ylabel("predicted goodput (Mbit/s)")
    ax.legend(fontsize=7, frameon=False)
    return fig
