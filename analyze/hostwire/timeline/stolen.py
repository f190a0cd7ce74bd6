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


def frozen(event_t: np.ndarray, samples: pd.DataFrame | None, tick_ns: int,
           min_silence_ns: int = MIN_SILENCE_NS) -> pd.DataFrame:
    """The host's silences confirmed by every CPU's steal counter: t_start_ns, t_end_ns.
    event_t: every stamp of the kernel trace and the capture; samples: /proc/stat samples
    (hostwire.read.resources: t_ns, cpu, steal_ns; cpu -1 the whole host); tick_ns: the
    counters' tick."""
    empty = pd.DataFrame({"t_start_ns": pd.Series(dtype=np.int64), "t_end_ns": pd.Series(dtype=np.int64)})
    if samples is None or len(samples) == 0 or len(event_t) < 2:
        return empty
    t = np.sort(np.asarray(event_t, dtype=np.int64))  # repeated stamps only add zero steps: no unique needed
    long = np.flatnonzero(np.diff(t) >= min_silence_ns)
    if len(long) == 0:
        return empty
    start, end = t[long], t[long + 1]
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
