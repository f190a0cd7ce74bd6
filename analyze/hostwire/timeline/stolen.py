"""When the hypervisor did not run this host at all (docs/timeline.md, "Gaps", vcpu-stolen).

A virtual machine's CPUs can be stopped by the host that runs it; /proc/stat counts that time as
`steal`, per CPU, in ticks. While every virtual CPU is stopped nothing happens in the guest: no
scheduler or network event on any CPU, no frame on its links. Such a freeze shows as a silence of
the whole host: an interval between two consecutive events of the kernel trace (any CPU) and the
capture (any frame) of at least `min_silence_ns`, during which every CPU's steal counter, over the
/proc/stat samples around it, grew by at least the silence less one tick (the counters move in
ticks; the silences between the same two samples share what was stolen there, the longest first). A silence that the steal counters do not cover is not a freeze (a host that is merely idle
is silent too) and is left to the other causes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# A host that records its scheduler and its traffic logs events every few microseconds; a silence
# of a millisecond is rare unless the machine stopped, and the steal counters must confirm it.
MIN_SILENCE_NS = 1_000_000
OPEN = 1 << 62  # before the first event and after the last


def _empty() -> pd.DataFrame:
    return pd.DataFrame({"t_start_ns": pd.Series(dtype=np.int64), "t_end_ns": pd.Series(dtype=np.int64)})


def frozen(event_t: np.ndarray, samples: pd.DataFrame | None, tick_ns: int,
           min_silence_ns: int = MIN_SILENCE_NS) -> pd.DataFrame:
    """The host's silences confirmed by every CPU's steal counter: t_start_ns, t_end_ns.
    event_t: every stamp of the kernel trace and the capture; samples: /proc/stat samples
    (hostwire.read.resources: t_ns, cpu, steal_ns; cpu -1 the whole host); tick_ns: the
    counters' tick."""
    if samples is None or len(samples) == 0 or len(event_t) < 2:
        return _empty()
    t = np.sort(np.asarray(event_t, dtype=np.int64))  # repeated stamps only add zero steps: no unique needed
    long = np.flatnonzero(np.diff(t) >= min_silence_ns)
    return confirmed_by_steal(t[long], t[long + 1], samples, tick_ns)


def silences(t: np.ndarray, min_silence_ns: int = MIN_SILENCE_NS) -> tuple[np.ndarray, np.ndarray]:
    """The silences of one source of events (sorted stamps): between consecutive events, at least
    min_silence_ns long; and before its first event and after its last, open."""
    t = np.asarray(t, dtype=np.int64)
    if len(t) == 0:
        return np.array([-OPEN], np.int64), np.array([OPEN], np.int64)
    long = np.flatnonzero(np.diff(t) >= min_silence_ns)
    return np.r_[-OPEN, t[long], t[-1]], np.r_[t[0], t[long + 1], OPEN]


def common_silences(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], first_ns: int, last_ns: int,
                    min_silence_ns: int = MIN_SILENCE_NS) -> tuple[np.ndarray, np.ndarray]:
    """The silences of two sources together (each as `silences` gives them), between the first
    and the last event of both: where both are silent, at least min_silence_ns long. The same as
    the silences of the two sources' stamps merged, without holding the stamps."""
    (a_s, a_e), (b_s, b_e) = a, b
    i0 = np.searchsorted(b_e, a_s, side="right")  # the first of b ending after each of a starts
    i1 = np.searchsorted(b_s, a_e, side="left")   # past the last of b starting before it ends
    n = np.maximum(i1 - i0, 0)
    rows = np.repeat(np.arange(len(a_s)), n)
    k = i0[rows] + np.arange(len(rows)) - np.repeat(np.cumsum(n) - n, n)
    start = np.maximum(np.maximum(a_s[rows], b_s[k]), first_ns)
    end = np.minimum(np.minimum(a_e[rows], b_e[k]), last_ns)
    keep = end - start >= min_silence_ns
    return start[keep], end[keep]


def confirmed_by_steal(start: np.ndarray, end: np.ndarray, samples: pd.DataFrame | None, tick_ns: int) -> pd.DataFrame:
    """The silences [start, end) that every CPU's steal counter covers (the module doc)."""
    empty = _empty()
    if samples is None or len(samples) == 0 or len(start) == 0:
        return empty
    confirmed = np.ones(len(start), dtype=bool)
    per_cpu = samples[samples["cpu"].to_numpy() >= 0]
    if len(per_cpu) == 0:
        return empty
    for _, s in per_cpu.groupby("cpu", sort=True):
        s = s.sort_values("t_ns", kind="stable")
        when, steal = s["t_ns"].to_numpy().astype(np.int64), s["steal_ns"].to_numpy().astype(np.int64)
        before = np.searchsorted(when, start, side="right") - 1  # the last sample at or before the silence
        after = np.searchsorted(when, end, side="left")  # the first sample at or after its end
        known = (before >= 0) & (after < len(when))
        stolen = np.where(known, steal[np.minimum(after, len(when) - 1)] - steal[np.maximum(before, 0)], 0)
        # the silences between the same two samples share what was stolen there: the longest first
        length = end - start
        order = np.lexsort((-length, before))
        spent = pd.Series(length[order]).groupby(before[order]).cumsum().to_numpy()
        within = np.empty(len(start), dtype=bool)
        within[order] = spent <= stolen[order] + int(tick_ns)
        confirmed &= known & (stolen > 0) & within
    return pd.DataFrame({"t_start_ns": start[confirmed], "t_end_ns": end[confirmed]})
