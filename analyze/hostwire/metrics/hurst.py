"""Hurst parameter from the variance-time plot (DESIGN.md section 8). The variance of the rate
averaged over bins of length t falls as t^(-beta); with counts N_t, Var(N_t) grows as t^(2 - beta),
so beta = 2 - slope of log Var(N_t) against log t, and H = 1 - beta / 2 = slope / 2."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hostwire.errors import InputError

COLUMNS = ["stream", "hurst", "beta", "fit_from_ns", "fit_to_ns", "points", "r2"]


def variance_time_fit(t_ns: np.ndarray, var: np.ndarray, fit_from_ns: int | None = None,
                      fit_to_ns: int | None = None) -> dict[str, float]:
    """Least-squares line through (log t, log Var(N_t)) over the fit range; returns hurst, beta,
    fit_from_ns, fit_to_ns, points, r2. Raises when fewer than 3 usable points lie in the range."""
    t = np.asarray(t_ns, dtype=np.float64)
    v = np.asarray(var, dtype=np.float64)
    keep = (v > 0) & np.isfinite(v)
    if fit_from_ns is not None:
        keep &= t >= fit_from_ns
    if fit_to_ns is not None:
        keep &= t <= fit_to_ns
    if keep.sum() < 3:
        raise InputError(f"Hurst fit needs at least 3 bin lengths with non-zero variance in the fit range, "
                         f"found {int(keep.sum())}")
    x, y = np.log(t[keep]), np.log(v[keep])
    slope, intercept = np.polyfit(x, y, 1)
    resid = y - (slope * x + intercept)
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((resid ** 2).sum()) / ss_tot if ss_tot > 0 else 1.0
    beta = 2.0 - slope
    return {"hurst": 1.0 - beta / 2.0, "beta": beta, "fit_from_ns": int(t[keep].min()),
            "fit_to_ns": int(t[keep].max()), "points": int(keep.sum()), "r2": r2}


def df_hurst(idc_table: pd.DataFrame, fit_from_ns: int | None = None, fit_to_ns: int | None = None) -> pd.DataFrame:
    """One row per stream of an IDC table (hostwire.metrics.idc.df_idc): COLUMNS."""
    rows = []
    errors = []
    for name, curve in idc_table.groupby("stream", sort=False):
        try:
            fit = variance_time_fit(curve["t_ns"].to_numpy(), curve["var"].to_numpy(), fit_from_ns, fit_to_ns)
        except InputError as err:
            errors.append(f"{name}: {err}")
            continue
        rows.append({"stream": name, **fit})
    if not rows:
        raise InputError("; ".join(errors) if errors else "no stream to fit")
    return pd.DataFrame(rows, columns=COLUMNS)


def df_hurst_of_idc(idc_table: pd.DataFrame, fit_from_ns: int | None, fit_to_ns: int | None) -> pd.DataFrame:
    """df_hurst with the command's default fit range: without --fit-from and --fit-to, from the
    geometric middle of the IDC table's grid up (the long-range end, where the slope is H's)."""
    if fit_from_ns is None and fit_to_ns is None:
        grid = idc_table["t_ns"].to_numpy().astype(np.float64)
        fit_from_ns = int(np.sqrt(grid.min() * grid.max()))
    return df_hurst(idc_table, fit_from_ns, fit_to_ns)
