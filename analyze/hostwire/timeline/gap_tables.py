"""What the gap analysis (hostwire.timeline.gaps) hands out, and where it goes as it is made.

The explanation gives each gap once it closes, slab after slab (gaps.explain_into), to a sink:
`Whole` keeps every table in memory (gaps.explain), `Totals` keeps only each stream's sums
(`hostwire gaps --summary`, the campaign's analysis), `Digest` the sums, the longest gaps and the
preempters per task (the one-run report), `OnDisk` writes each stream's rows to a
scratch file and gives them back stream by stream (`hostwire gaps` on a long run), so that what a
long run's analysis holds does not follow the number of its gaps."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import IO

import numpy as np
import pandas as pd

from hostwire.spill import scratch_file
from hostwire.timeline.gap_tasks import PREEMPTER_COLUMNS
from hostwire.timeline.waits import WAIT_COLUMNS, summarize

CAUSES = ("on_wire", "vcpu_stolen", "receiver_window", "retransmit_timeout", "wire_busy", "preempted",
          "blocked_in_call", "app_idle", "awaiting_ack", "qdisc", "send_path", "unexplained")
CAUSE_NAMES = {c: c.replace("_", "-") for c in CAUSES}
# the TCP causes: a UDP flow has no window, acknowledgements or retransmissions (its datagrams do
# wait in a qdisc, which the device's enqueues show)
TCP_CAUSES = ("receiver_window", "retransmit_timeout", "awaiting_ack")
# receiver_window's time split by what the receiver did on its own host (hostwire.timeline.receiver_host;
# all 0 without a trace of that host)
RECEIVER_PARTS = ("receiver_preempted", "receiver_blocked", "receiver_not_reading")
GAP_COLUMNS = ["stream", "proto", "pid", "comm", "t_start_ns", "t_end_ns", "gap_ns", "threshold_ns",
               *[f"{c}_ns" for c in CAUSES], "preempted_by", *[f"{c}_ns" for c in RECEIVER_PARTS],
               "receiver_preempted_by", "waited_in"]
TEXT_COLUMNS = ("stream", "proto", "comm", "preempted_by", "receiver_preempted_by", "waited_in")
# what a stream's summary adds up: the gap time, each cause's, and receiver_window's parts
SUMMED = ["gap_ns", *[f"{c}_ns" for c in CAUSES], *[f"{p}_ns" for p in RECEIVER_PARTS]]
SHARES = [*CAUSES, *RECEIVER_PARTS]  # each a share of the gap time; the parts add up to receiver_window's


def empty_gaps() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="object" if c in TEXT_COLUMNS else "int64") for c in GAP_COLUMNS})


class Sink:
    """Where the explanation puts each stream's closed gaps (gaps.explain_into): begin() once with
    the streams in their order, add() for each stream's gaps closed in a piece (in time order),
    finish() once with each stream's sender's name (known only after the kernel trace is read).
    add()'s waits: per gap and call, the ns the sender's app-idle time spent in it (WAIT_COLUMNS)."""

    def begin(self, streams: list[str], cannot_tell: list[str], sources: dict[str, str]) -> None:
        self.streams, self.cannot_tell, self.sources = list(streams), list(cannot_tell), dict(sources)

    def add(self, stream: str, gaps: pd.DataFrame, preempters: pd.DataFrame, waits: pd.DataFrame) -> None:
        raise NotImplementedError

    def finish(self, comms: dict[str, str]) -> None:
        self.comms = dict(comms)

    def close(self) -> None:
        """Lets go of what the sink holds outside memory (OnDisk's files)."""

    def _named(self, stream: str, gaps: pd.DataFrame) -> pd.DataFrame:
        """The stream's rows with its sender's name."""
        gaps["comm"] = self.comms.get(stream, "")
        return gaps


class Whole(Sink):
    """Every gap and preempter row in memory: the tables of gaps.explain."""

    def begin(self, streams: list[str], cannot_tell: list[str], sources: dict[str, str]) -> None:
        super().begin(streams, cannot_tell, sources)
        self.gaps: dict[str, list[pd.DataFrame]] = {s: [] for s in streams}
        self.preempters: dict[str, list[pd.DataFrame]] = {s: [] for s in streams}
        self.waited: dict[str, list[pd.DataFrame]] = {s: [] for s in streams}

    def add(self, stream: str, gaps: pd.DataFrame, preempters: pd.DataFrame, waits: pd.DataFrame) -> None:
        self.gaps[stream].append(gaps)
        if len(preempters):
            self.preempters[stream].append(preempters)
        if len(waits):
            self.waited[stream].append(waits)

    def waits(self) -> pd.DataFrame:
        """Per gap and call, the ns and share of the gap's app-idle time (WAIT_COLUMNS), stream by stream."""
        found = [w for s in self.streams for w in self.waited[s]]
        return pd.concat(found, ignore_index=True) if found else pd.DataFrame(columns=WAIT_COLUMNS)

    def tables(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The gaps (GAP_COLUMNS) and the preempters (PREEMPTER_COLUMNS), stream by stream."""
        found = [self._named(s, g) for s in self.streams for g in self.gaps[s]]
        pre = [p for s in self.streams for p in self.preempters[s]]
        gaps = pd.concat(found, ignore_index=True)[GAP_COLUMNS] if found else empty_gaps()
        preempters = pd.concat(pre, ignore_index=True) if pre else pd.DataFrame(columns=PREEMPTER_COLUMNS)
        gaps.attrs["cannot_tell"] = self.cannot_tell
        gaps.attrs["sources"] = self.sources
        return gaps, preempters


class Totals(Sink):
    """Each stream's count of gaps and sums of gap_ns and of each cause's ns: summary() without
    the rows."""

    def begin(self, streams: list[str], cannot_tell: list[str], sources: dict[str, str]) -> None:
        super().begin(streams, cannot_tell, sources)
        self.count: dict[str, int] = {}
        self.sums: dict[str, np.ndarray] = {}
        self.waited: list[pd.DataFrame] = []  # stream, waited_in, ns: summed as they come

    def add(self, stream: str, gaps: pd.DataFrame, preempters: pd.DataFrame, waits: pd.DataFrame) -> None:
        sums = _summed(gaps).to_numpy(np.int64).sum(axis=0)
        self.count[stream] = self.count.get(stream, 0) + len(gaps)
        self.sums[stream] = self.sums[stream] + sums if stream in self.sums else sums
        if len(waits):
            both = pd.concat([*self.waited, waits[["stream", "waited_in", "ns"]]], ignore_index=True)
            self.waited = [both.groupby(["stream", "waited_in"], as_index=False)["ns"].sum()]

    def summary(self) -> pd.DataFrame:
        """summary() of every gap the sink was given."""
        named = sorted(self.count)
        per = pd.DataFrame(np.array([self.sums[s] for s in named], dtype=np.int64).reshape(len(named), len(SUMMED)),
                           index=pd.Index(named, name="stream"), columns=SUMMED)
        per.insert(0, "gaps", np.array([self.count[s] for s in named], dtype=np.int64))
        return _with_waits(_shares(per), self.waited[0] if self.waited else None)


class Digest(Totals):
    """What a report shows of the gaps: Totals' sums, the `keep` longest gaps (the rows a stable
    sort of the whole table by gap_ns, longest first, puts first), and the preempters' time
    summed per task (pid, comm, role: ns, and the gaps it ran in)."""

    def __init__(self, keep: int) -> None:
        self.keep = keep

    def begin(self, streams: list[str], cannot_tell: list[str], sources: dict[str, str]) -> None:
        super().begin(streams, cannot_tell, sources)
        self.top: pd.DataFrame | None = None
        self.tasks: pd.DataFrame | None = None

    def add(self, stream: str, gaps: pd.DataFrame, preempters: pd.DataFrame, waits: pd.DataFrame) -> None:
        super().add(stream, gaps, preempters, waits)
        # the whole table's order is the streams', then time: it breaks ties of gap_ns
        ranked = gaps.assign(rank=self.streams.index(stream))
        both = ranked if self.top is None else pd.concat([self.top, ranked], ignore_index=True)
        self.top = both.sort_values(["gap_ns", "rank", "t_start_ns"], ascending=[False, True, True],
                                    kind="stable").head(self.keep).reset_index(drop=True)
        if len(preempters):  # every row of a gap comes in one batch: its start names it there
            tasks = preempters.groupby(["pid", "comm", "role"], as_index=False).agg(
                ns=("ns", "sum"), gaps=("t_start_ns", "nunique"))
            both = tasks if self.tasks is None else pd.concat([self.tasks, tasks], ignore_index=True)
            self.tasks = both.groupby(["pid", "comm", "role"], as_index=False)[["ns", "gaps"]].sum()

    def longest(self) -> pd.DataFrame:
        """The longest gaps, longest first (GAP_COLUMNS)."""
        if self.top is None:
            return empty_gaps()
        top = self.top.assign(comm=[self.comms.get(s, "") for s in self.top["stream"]])
        return top[GAP_COLUMNS]

    def per_task(self) -> pd.DataFrame:
        """pid, comm, role, ns (the time it ran while a sender waited), gaps (how many)."""
        return self.tasks if self.tasks is not None else pd.DataFrame(columns=["pid", "comm", "role", "ns", "gaps"])


class OnDisk(Sink):
    """Each stream's gaps and preempter rows written to a scratch file as they come (unlinked at
    once: nothing is left however the process ends), given back stream by stream."""

    def begin(self, streams: list[str], cannot_tell: list[str], sources: dict[str, str]) -> None:
        super().begin(streams, cannot_tell, sources)
        self.files: dict[tuple[str, str], IO[bytes]] = {}

    def add(self, stream: str, gaps: pd.DataFrame, preempters: pd.DataFrame, waits: pd.DataFrame) -> None:
        for what, table in (("gaps", gaps), ("preempters", preempters), ("waits", waits)):
            if len(table):
                if (stream, what) not in self.files:
                    self.files[stream, what] = scratch_file()
                pickle.dump(table, self.files[stream, what], protocol=pickle.HIGHEST_PROTOCOL)

    def pieces(self, what: str) -> Iterator[pd.DataFrame]:
        """The gaps (what="gaps", GAP_COLUMNS), the preempters' or the waits' rows, stream by stream, a piece
        at a time; each stream's file is closed once read."""
        for stream in self.streams:
            handle = self.files.pop((stream, what), None)
            if handle is None:
                continue
            with handle:
                handle.flush()
                handle.seek(0)
                while True:
                    try:
                        table = pickle.load(handle)
                    except EOFError:
                        break
                    yield self._named(stream, table)[GAP_COLUMNS] if what == "gaps" else table

    def close(self) -> None:
        for handle in self.files.values():
            handle.close()
        self.files.clear()


def summary(gaps: pd.DataFrame, waits: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per stream (and `all`): gaps, gap_ns (their total), each cause's share of it (and the
    shares of receiver_window's parts, which add up to its share), and
    waited_in: the calls the senders' app-idle time was spent in, the top three with their share
    of it (waits: the gaps' WAIT_COLUMNS rows, Whole.waits())."""
    if len(gaps) == 0:
        return _with_waits(_shares(pd.DataFrame(columns=["gaps", *SUMMED])), None)
    per = _summed(gaps).groupby(gaps["stream"], sort=True).sum()
    per.insert(0, "gaps", gaps.groupby("stream", sort=True).size())
    return _with_waits(_shares(per), waits)


def _summed(gaps: pd.DataFrame) -> pd.DataFrame:
    """The SUMMED columns of gap rows; receiver_window's parts 0 where a table has none of them
    (one made before the receiver's host was traced, or by hand)."""
    return gaps.reindex(columns=SUMMED, fill_value=0)


def _with_waits(out: pd.DataFrame, waits: pd.DataFrame | None) -> pd.DataFrame:
    """summary's rows with waited_in, from the per-call ns (stream, waited_in, ns) of their gaps."""
    if waits is None or len(waits) == 0:
        return out.assign(waited_in="")
    per = waits.groupby(["stream", "waited_in"], as_index=False, observed=True)["ns"].sum()
    per = pd.concat([per, per.groupby("waited_in", as_index=False)["ns"].sum().assign(stream="all")],
                    ignore_index=True)
    idle = out["app_idle_share"].to_numpy(np.float64) * out["gap_ns"].to_numpy(np.float64)
    return out.assign(waited_in=[summarize(per[per["stream"] == s], float(i)) for s, i in zip(out["stream"], idle)])


def _shares(per: pd.DataFrame) -> pd.DataFrame:
    """Per stream and `all` from the per-stream sums (index: the stream)."""
    if len(per) == 0:
        return pd.DataFrame(columns=["stream", "gaps", "gap_ns", *[f"{c}_share" for c in SHARES]])
    per.loc["all"] = per.sum()
    out = per.reset_index()
    for c in SHARES:
        out[f"{c}_share"] = out[f"{c}_ns"] / out["gap_ns"]
    return out[["stream", "gaps", "gap_ns", *[f"{c}_share" for c in SHARES]]]
