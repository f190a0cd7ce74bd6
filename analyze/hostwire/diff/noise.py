"""Which terms of a difference lie within the repetitions' spread (docs/timeline.md, "Why two runs
differ"): per term, Welch's t-test of the repetitions' own factors on side A against side B;
over the terms of one difference, Holm's step-down correction keeps the chance of marking any
term of an unchanged set-up beyond noise at ALPHA. A term the test does not reject is noise."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

from hostwire.diff.terms import Facts, Term, run_factor

ALPHA = 0.01  # family-wise, per difference (each grid point of two campaigns is one)


def p_value(a: np.ndarray, b: np.ndarray) -> float:
    """Welch's two-sided p of equal means; 1 when both sides agree exactly, 0 when each side is
    constant and they differ."""
    if a.std(ddof=1) == 0 and b.std(ddof=1) == 0:
        return 1.0 if np.isclose(a.mean(), b.mean(), rtol=1e-12, atol=0) else 0.0
    return float(stats.ttest_ind(a, b, equal_var=False).pvalue)


def mark(terms: list[Term], a: Sequence[Facts], b: Sequence[Facts], alpha: float = ALPHA) -> None:
    """Sets each term's noise flag (left None when a side has fewer than two repetitions)."""
    if len(a) < 2 or len(b) < 2:
        return
    p = np.array([p_value(np.array([run_factor(f, t.group, t.term) for f in a]),
                          np.array([run_factor(f, t.group, t.term) for f in b])) for t in terms])
    order = np.argsort(p, kind="stable")
    m = len(p)
    rejected = np.zeros(m, dtype=bool)
    for rank, i in enumerate(order):  # Holm: the k-th smallest p against alpha / (m - k)
        if p[i] > alpha / (m - rank):
            break
        rejected[i] = True
    for t, r in zip(terms, rejected):
        t.noise = not bool(r)


def goodput_p(a: Sequence[Facts], b: Sequence[Facts]) -> float | None:
    """Welch's p that the two sides' runs have the same mean goodput (None below two runs a side).
    The change itself can lie beyond the spread while each of its terms, split over many factors
    that each scatter, stays within its own: the two marks answer different questions."""
    if len(a) < 2 or len(b) < 2:
        return None
    return p_value(np.array([f.goodput_bit_s for f in a]), np.array([f.goodput_bit_s for f in b]))
