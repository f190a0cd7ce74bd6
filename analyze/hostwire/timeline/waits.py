"""What an idle sender waited for (docs/timeline.md, "What an idle sender waited for"): the
system calls its sending thread was in during a gap's app-idle time, each with its share of
that time, and the descriptor's kind and peer where the call has one (`recvfrom
198.18.0.1:40312`: a request; `read /var/log/x`: a file).

The calls are the sender process's own, of every backend (`hostwire record` adds the calls a
program blocks in, `hw-schedtrace --waits`: futex, epoll_wait, clock_nanosleep, ...). The sending
thread of a stream is the one that made most of its send calls (the sender's main thread when
none is known). A gap's app-idle pieces (hostwire.timeline.gaps) are intersected with that
thread's calls: a call's share is its time inside them over the gap's app-idle time, and
`(no call)` is the rest (the thread ran its own code, or slept in a call that was not recorded).
The intersection is additive, so a gap explained in slabs gets the same shares as whole."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hostwire.timeline.intervals import split_by_key, stream_codes

WAIT_COLUMNS = ["stream", "t_start_ns", "waited_in", "ns", "share"]  # per gap and call: `gaps --waits`
NO_CALL = "(no call)"
SHOWN = 0.0005  # a call's least share that the text names (below, it would read 0.0%; the rows keep it)
# calls that wait for any of several descriptors: the call the thread made next, on the
# descriptor that woke it, names what they waited for
MULTIPLEXERS = frozenset({"epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll", "select", "pselect6"})
READS = frozenset({"read", "readv", "recvfrom", "recvmsg", "recvmmsg", "accept", "accept4", "pread64"})


def peer(fd_kind: pd.Series, fd_desc: pd.Series) -> np.ndarray:
    """A descriptor's peer as the label shows it: a socket's remote endpoint (its local one when
    not connected: a listening socket), a file's or unix socket's path, `pipe`; "" when unknown."""
    kind, desc = fd_kind.astype(str).to_numpy(), fd_desc.fillna("").astype(str)
    local, _, remote = (desc.str.partition(">")[c].to_numpy() for c in (0, 1, 2))
    inet = np.isin(kind, ["tcp", "udp"])
    connected = inet & (remote != "") & (remote != "*") & ~pd.Series(remote).str.startswith("0.0.0.0:").to_numpy()
    out = np.where(connected, remote, np.where(inet, local, ""))
    out = np.where(np.isin(kind, ["file", "unix"]), desc.to_numpy(), out)
    return np.where(kind == "pipe", "pipe", out).astype(object)


def describe_fds(calls: pd.DataFrame, sockets: pd.DataFrame | None) -> pd.DataFrame:
    """calls with fd_kind and fd_desc filled from the socket samples (raw/sockets.tsv) where the
    backend left them unknown (tracefs): the (pid, fd)'s socket in the last sample at or before
    the call, else the first after it (a socket opened between two samples)."""
    if sockets is None or len(sockets) == 0 or len(calls) == 0:
        return calls
    unknown = (calls["fd_kind"].astype(str).to_numpy() == "unknown") & (calls["fd"].to_numpy() >= 0)
    if not unknown.any():
        return calls
    s = sockets.assign(desc=sockets["local"].astype(str) + ">" + sockets["remote"].astype(str))
    s = s[["t_ns", "pid", "fd", "proto", "desc"]].sort_values("t_ns", kind="stable")
    s = s.astype({"pid": np.int64, "fd": np.int64, "t_ns": np.int64})
    q = calls.loc[unknown, ["t_enter_ns", "pid", "fd"]].astype(np.int64).reset_index()
    q = q.sort_values("t_enter_ns", kind="stable")
    found = None
    for direction in ("backward", "forward"):
        hit = pd.merge_asof(q, s, left_on="t_enter_ns", right_on="t_ns", by=["pid", "fd"], direction=direction)
        found = hit if found is None else found.fillna({"proto": hit["proto"], "desc": hit["desc"]})
    assert found is not None
    found = found.dropna(subset=["proto"]).set_index("index")
    out = calls.copy()
    out["fd_kind"] = out["fd_kind"].astype(str)
    out.loc[found.index, "fd_kind"] = found["proto"].astype(str)
    out.loc[found.index, "fd_desc"] = found["desc"].astype(str)
    return out


def labels(calls: pd.DataFrame) -> np.ndarray:
    """Each call's label: its name, then its descriptor's peer where known; a multiplexer
    (epoll_wait, poll, select) followed by a read on a known descriptor by the same thread names
    that read's: `epoll_wait > recvfrom 198.18.0.1:40312`."""
    name = calls["call"].astype(str).to_numpy().astype(object)
    who = peer(calls["fd_kind"], calls["fd_desc"])
    out = np.where(who != "", name + " " + who, name)
    # calls by thread in entry order: a multiplexer's next call is the next row of its thread
    order = np.lexsort((calls["t_enter_ns"].to_numpy(), calls["tid"].to_numpy()))
    tid, nm, lab = calls["tid"].to_numpy()[order], name[order], out[order]
    nxt = np.r_[np.arange(1, len(order)), 0] if len(order) else np.zeros(0, np.int64)
    waker = (np.isin(nm, list(MULTIPLEXERS)) & (tid == tid[nxt]) & np.isin(nm[nxt], list(READS))
             & (who[order][nxt] != "")) if len(order) else np.zeros(0, bool)
    waker[-1:] = False
    lab = lab.copy()
    lab[waker] = nm[waker] + " > " + lab[nxt[waker]]
    out[order] = lab
    return out


def sending_threads(calls: pd.DataFrame, sends: pd.DataFrame | None, senders: dict[str, int]) -> dict[str, int]:
    """stream -> the thread that made most of its send calls (sends: stream, pid, t_enter_ns, the
    stream's writes; matched to calls by process and entry stamp), else the sender's main thread."""
    out = {name: pid for name, pid in senders.items() if pid > 0}
    if sends is None or len(sends) == 0 or len(calls) == 0 or "pid" not in sends.columns:
        return out
    key = calls[["pid", "t_enter_ns", "tid"]].drop_duplicates(["pid", "t_enter_ns"])
    where = pd.MultiIndex.from_arrays([key["pid"].to_numpy(np.int64), key["t_enter_ns"].to_numpy(np.int64)])
    at = where.get_indexer(pd.MultiIndex.from_arrays([sends["pid"].to_numpy(np.int64),
                                                      sends["t_enter_ns"].to_numpy(np.int64)]))
    hit = at >= 0
    if hit.any():  # a long run's sends are many: their stream stays a code, not a string each
        codes, names = stream_codes(sends["stream"])
        pairs = pd.DataFrame({"stream": codes[hit], "tid": key["tid"].to_numpy(np.int64)[at[hit]]})
        most = pairs.groupby(["stream", "tid"]).size().reset_index(name="n")
        most = most.sort_values(["stream", "n", "tid"], ascending=[True, False, True], kind="stable")
        first = most.drop_duplicates("stream")
        out.update({str(names[c]): int(t) for c, t in zip(first["stream"], first["tid"]) if c >= 0})
    return out


def stream_waits(calls: pd.DataFrame, threads: dict[str, int],
                 spans: dict[str, tuple[int, int]]) -> pd.DataFrame | None:
    """Per stream, its sending thread's calls that reach into the stream's span (its first to its
    last data frame: no gap lies outside it): stream, t_enter_ns, t_exit_ns, waited_in (the
    label, categorical). Calls of one thread do not overlap; an unfinished call is cut at the
    thread's next entry."""
    if len(calls) == 0 or not threads:
        return None
    calls = calls.assign(waited_in=labels(calls))
    rows = []
    by_tid = {int(t): g for t, g in calls.groupby("tid", sort=False)}
    for name, tid in threads.items():
        mine = by_tid.get(int(tid))
        if mine is None or name not in spans:
            continue
        lo, hi = spans[name]
        t0, t1 = mine["t_enter_ns"].to_numpy(np.int64), mine["t_exit_ns"].to_numpy(np.int64)
        order = np.argsort(t0, kind="stable")
        t0, t1 = t0[order], t1[order]
        t1 = np.minimum(t1, np.r_[t0[1:], np.iinfo(np.int64).max])
        keep = (t1 > lo) & (t0 < hi) & (t1 > t0)
        rows.append(pd.DataFrame({"stream": name, "t_enter_ns": t0[keep], "t_exit_ns": t1[keep],
                                  "waited_in": mine["waited_in"].to_numpy()[order][keep]}))
    if not rows:
        return None
    out = pd.concat(rows, ignore_index=True)
    return out.astype({"stream": "category", "waited_in": "category"})


class Waits:
    """The sending threads' calls (stream_waits' table), split by stream once, in entry order;
    each stream's calls are disjoint, so their ends ascend too."""

    def __init__(self, rows: pd.DataFrame | None) -> None:
        self.by_stream: dict[str, tuple[np.ndarray, ...]] = {}
        self.names = np.zeros(0, dtype=object)
        if rows is None or len(rows) == 0:
            return
        codes, streams = stream_codes(rows["stream"])
        label = pd.Categorical(rows["waited_in"].astype(str))
        self.names = np.asarray(label.categories, dtype=object)
        t0 = rows["t_enter_ns"].to_numpy(np.int64)
        for code, parts in split_by_key(codes, t0, t0, rows["t_exit_ns"].to_numpy(np.int64),
                                        label.codes.astype(np.int64)).items():
            if code >= 0:
                self.by_stream[str(streams[code])] = parts

    def ns_in(self, name: str, start: np.ndarray, end: np.ndarray, gap: np.ndarray) -> pd.DataFrame:
        """Per gap and call, the ns the stream's sending thread spent in the call inside the
        given pieces (sorted, disjoint: a gap's app-idle segments): gap, waited_in, ns."""
        calls = self.by_stream.get(name)
        if calls is None or len(start) == 0:
            return pd.DataFrame({"gap": np.zeros(0, np.int64), "waited_in": np.zeros(0, object),
                                 "ns": np.zeros(0, np.int64)})
        t0, t1, code = calls
        i0 = np.searchsorted(t1, start, side="right")
        i1 = np.searchsorted(t0, end, side="left")
        n = np.maximum(i1 - i0, 0)
        piece = np.repeat(np.arange(len(start)), n)
        ci = i0[piece] + (np.arange(len(piece)) - np.repeat(np.cumsum(n) - n, n))
        ns = np.minimum(end[piece], t1[ci]) - np.maximum(start[piece], t0[ci])
        ran = ns > 0
        return pd.DataFrame({"gap": gap[piece][ran], "waited_in": self.names[code[ci][ran]], "ns": ns[ran]})


    def table(self, name: str, rows: list[pd.DataFrame], first: np.ndarray, app_idle_ns: np.ndarray) -> pd.DataFrame:
        """wait_table of a stream whose sending thread's calls are known; none (WAIT_COLUMNS, no
        row) for another: without its calls nothing is known of where its idle time went."""
        if name not in self.by_stream:
            return pd.DataFrame({c: pd.Series(dtype=object if c in ("stream", "waited_in") else
                                              np.float64 if c == "share" else np.int64) for c in WAIT_COLUMNS})
        return wait_table(name, rows, first, app_idle_ns)


def wait_table(name: str, rows: list[pd.DataFrame], first: np.ndarray, app_idle_ns: np.ndarray) -> pd.DataFrame:
    """WAIT_COLUMNS from every piece's ns_in rows of a stream's gaps (gap: the index into first),
    with the time outside any call as NO_CALL; share: of the gap's app-idle time. Per gap, the
    calls by ns, the longest first (ties by name)."""
    idle = np.flatnonzero(app_idle_ns > 0)
    rest = pd.DataFrame({"gap": idle, "waited_in": NO_CALL, "ns": app_idle_ns[idle]})
    if rows:
        w = pd.concat(rows, ignore_index=True).groupby(["gap", "waited_in"], as_index=False)["ns"].sum()
        in_calls = w.groupby("gap")["ns"].sum()
        rest["ns"] = rest["ns"].to_numpy() - in_calls.reindex(rest["gap"]).fillna(0).to_numpy(np.int64)
        w = pd.concat([w, rest[rest["ns"] > 0]], ignore_index=True)
    else:
        w = rest
    w = w.assign(ns=w["ns"].astype(np.int64))
    w["share"] = w["ns"].to_numpy() / app_idle_ns[w["gap"].to_numpy()]
    w["stream"] = name
    w["t_start_ns"] = first[w["gap"].to_numpy()]
    w = w.sort_values(["t_start_ns", "ns", "waited_in"], ascending=[True, False, True], kind="stable")
    return w[WAIT_COLUMNS].reset_index(drop=True)


def describe_waits(waits: pd.DataFrame, first: np.ndarray) -> np.ndarray:
    """Per gap: 'call peer share%; ...' (wait_table's rows of the gaps starting at first), the
    calls of at least SHOWN of its app-idle time."""
    out = np.full(len(first), "", dtype=object)
    waits = waits[waits["share"].to_numpy(np.float64) >= SHOWN]
    if len(waits) == 0:
        return out
    text = waits["waited_in"].astype(str) + " " + (waits["share"] * 100).round(1).astype(str) + "%"
    joined = (text.astype(object) + "; ").groupby(waits["t_start_ns"].to_numpy(), sort=True).sum().str[:-2]
    out[np.searchsorted(first, joined.index.to_numpy())] = joined.to_numpy()
    return out


def summarize(per_call: pd.DataFrame, idle_ns: float, top: int = 3) -> str:
    """The top calls over a stream's app-idle time: 'call share%; ...' from per_call (waited_in,
    ns summed over its gaps); idle_ns: its app-idle ns. Empty without app-idle time."""
    if idle_ns <= 0 or len(per_call) == 0:
        return ""
    w = per_call[per_call["ns"].to_numpy(np.float64) >= SHOWN * idle_ns]
    w = w.sort_values(["ns", "waited_in"], ascending=[False, True], kind="stable").head(top)
    return "; ".join(f"{c} {100 * ns / idle_ns:.1f}%" for c, ns in zip(w["waited_in"], w["ns"]))
