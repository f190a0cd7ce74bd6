"""The streams' tables of a run's timeline (docs/timeline.md): the system calls with their streams,
the streams and their owners, the frames joined to the writes whose bytes they carry, and the
backlog of written bytes not yet on the wire. Every builder takes DataFrames and returns one;
stamps are int64 ns of the run's reference clock."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pandas as pd

from hostwire.read.send_styles import SEND_CALLS, fixed_file_streams, sent_bytes
from hostwire.timeline.tables import require_columns, roles_of

STREAM_COLUMNS = ["stream", "src", "sport", "dst", "dport", "sender_pid", "sender_role", "sender_fd",
                  "receiver_pid", "receiver_role", "skaddr", "evidence"]
SEGMENT_COLUMNS = ["frame_t_ns", "stream", "seq_start", "seq_end", "payload_len", "retransmit", "write_id",
                   "t_enter_ns", "t_exit_ns", "bytes"]
BACKLOG_COLUMNS = ["stream", "t_ns", "written_bytes", "sent_bytes", "backlog_bytes"]

# ------------------------------------------------------------------ system calls


def calls(syscalls: pd.DataFrame, roles: dict[int, str], streams: pd.DataFrame | None = None,
          epochs: pd.DataFrame | None = None, datagrams: pd.DataFrame | None = None) -> pd.DataFrame:
    """The I/O system calls of whichever backend recorded them (the columns of
    hostwire.read.syscalls.read_syscalls) with role (of pid), is_send (a call that sends data),
    bytes (the result when positive, else 0) and stream: the one its fd's description names, else
    the stream of the socket the call's (pid, fd) held when it entered (epochs:
    hostwire.timeline.fd_lifetimes.fd_epochs), else the one the streams table gives its (pid, fd)
    when that (pid, fd) sent on no other stream, no epoch names that stream, and nothing says the
    fd was not an inet socket then, else the flow of the datagram a send on an unconnected UDP
    socket put on the wire (datagrams: hostwire.timeline.datagram_sends.datagram_sends); "" when
    none does, and "" for a stream's other direction (reversed_streams)."""
    from hostwire.timeline.datagram_sends import join
    from hostwire.timeline.fd_lifetimes import call_streams

    require_columns(syscalls, ["t_enter_ns", "t_exit_ns", "pid", "call", "fd", "result", "fd_desc"], "syscalls")
    out = syscalls.copy()
    out["role"] = roles_of(out["pid"].to_numpy(), np.full(len(out), "", dtype=object), roles)
    out.loc[out["role"] == "other", "role"] = ""
    out["is_send"] = out["call"].isin(SEND_CALLS).to_numpy() & ~out.get("unfinished", False)
    out["bytes"] = sent_bytes(out)
    stream, not_inet = call_streams(out, epochs)
    claimed = set(epochs["stream"].to_numpy()) - {""} if epochs is not None and len(epochs) else set()
    if streams is not None and len(streams):
        known = streams[(streams["sender_fd"] >= 0) & ~streams["stream"].isin(claimed)]
        known = known.drop_duplicates(["sender_pid", "sender_fd"], keep=False)  # a (pid, fd) of several: none
        key = pd.MultiIndex.from_arrays([known["sender_pid"].to_numpy(), known["sender_fd"].to_numpy()])
        idx = key.get_indexer(pd.MultiIndex.from_arrays([out["pid"].to_numpy(), out["fd"].to_numpy()]))
        hit = (idx >= 0) & (stream == "") & ~not_inet
        stream[hit] = known["stream"].to_numpy()[idx[hit]]
    stream = join(out, stream, datagrams)  # the sends alone are matched
    if streams is not None and len(streams):
        stream = np.where(np.isin(stream, reversed_streams(streams["stream"])), "", stream).astype(object)
    out["stream"] = fixed_file_streams(out, np.where(not_inet, "", stream).astype(object), streams)
    return out


def reversed_streams(names: Iterable[str]) -> np.ndarray:
    """The other direction of each stream that is not itself a stream: a socket's sends there are
    the few bytes going against a connection's data direction (a server's short replies to large
    requests), which are no stream's data (a stream is a connection in its data direction)."""
    known = {str(n) for n in names}
    flipped = {f"{b}>{a}" for a, sep, b in (n.partition(">") for n in known) if sep}
    return np.asarray(sorted(flipped - known), dtype=object)


# ------------------------------------------------------------------ streams


def _split(endpoint: str) -> tuple[str, int]:
    host, _, port = endpoint.rpartition(":")
    try:
        return host.strip("[]"), int(port)
    except ValueError:
        return host, -1


def streams_table(senders: pd.DataFrame, receivers: pd.DataFrame, sockets: pd.DataFrame,
                  send_fds: pd.DataFrame) -> pd.DataFrame:
    """Stream <-> pid <-> fd <-> 4-tuple <-> role. senders: role, pid, local, peer (the
    benchmark's send logs: exact; or, with columns fd and source "sockets", the sockets a recorded
    program's processes held: hostwire.timeline.program_streams); receivers: role, pid, sender_pid; sockets: socket_states.socket_owners();
    send_fds: pid, fd, stream and optionally source (`lifetime`: the socket an fd held while the
    process sent on it, hostwire.timeline.fd_lifetimes, which names the sender over the samples and
    the kernel trace, with its comm in an optional role column; else `fd_desc`: the fd a pid sent
    on most, with the stream its description names, "" when it names none); a receiver with a `stream` (a
    recorded program's) receives that stream, else the stream of its sender_pid. A stream is named
    local>remote in its data direction; evidence lists where each row's facts came from (bench,
    inet_sock_set_state, lifetime, fd_desc, fd)."""
    rows: dict[str, dict] = {}

    def row(stream: str) -> dict:
        if stream not in rows:
            src, sport = _split(stream.split(">")[0])
            dst, dport = _split(stream.split(">")[1])
            rows[stream] = {"stream": stream, "src": src, "sport": sport, "dst": dst, "dport": dport,
                            "sender_pid": -1, "sender_role": "", "sender_fd": -1, "receiver_pid": -1,
                            "receiver_role": "", "skaddr": "", "evidence": []}
        return rows[stream]

    for s in senders.itertuples(index=False):  # one per sending process (bench) or socket (sockets)
        r = row(f"{s.local}>{s.peer}")
        r.update(sender_pid=int(s.pid), sender_role=str(s.role))
        if int(getattr(s, "fd", -1)) >= 0:
            r["sender_fd"] = int(s.fd)
        r["evidence"].append(str(getattr(s, "source", "bench")))
    for s in sockets[sockets["active"].astype(bool)].itertuples(index=False):  # one per connection
        r = row(f"{s.local}>{s.remote}")
        r["skaddr"] = str(s.skaddr)
        if int(s.owner_pid) > 0 and r["sender_pid"] < 0:
            r["sender_pid"] = int(s.owner_pid)
        r["evidence"].append("inet_sock_set_state")
    by_pid = {r["sender_pid"]: r for r in rows.values() if r["sender_pid"] > 0}
    for s in send_fds.itertuples(index=False):
        if s.stream:
            r = row(str(s.stream))
            if _sent_it(r, s):  # the process whose calls sent the bytes, over one that held the socket
                r.update(sender_pid=int(s.pid), sender_fd=int(s.fd), sender_role=str(getattr(s, "role", "") or ""))
            r["sender_pid"] = int(s.pid) if r["sender_pid"] < 0 else r["sender_pid"]
            r["sender_fd"] = int(s.fd) if r["sender_fd"] < 0 or r["sender_pid"] == int(s.pid) else r["sender_fd"]
            r["evidence"].append(str(getattr(s, "source", "fd_desc")))
        elif (int(s.pid) in by_pid and by_pid[int(s.pid)]["sender_fd"] < 0
              and "bench" in by_pid[int(s.pid)]["evidence"]):  # a benchmark sender sends on one socket
            by_pid[int(s.pid)]["sender_fd"] = int(s.fd)
            by_pid[int(s.pid)]["evidence"].append("fd")
    by_sender = {r["sender_pid"]: r for r in rows.values() if r["sender_pid"] > 0}
    for s in receivers.itertuples(index=False):
        if str(getattr(s, "stream", "") or ""):  # a recorded program's socket, by the stream it held
            r = row(str(s.stream))
            r.update(receiver_pid=int(s.pid), receiver_role=str(s.role))
            r["evidence"].append("sockets")
        elif int(s.sender_pid) in by_sender:
            by_sender[int(s.sender_pid)].update(receiver_pid=int(s.pid), receiver_role=str(s.role))
    out = pd.DataFrame([{**r, "evidence": ",".join(dict.fromkeys(r["evidence"]))} for r in rows.values()],
                       columns=STREAM_COLUMNS)
    return out.sort_values("stream", kind="stable").reset_index(drop=True).astype(
        {"sport": "int64", "dport": "int64", "sender_pid": "int64", "sender_fd": "int64", "receiver_pid": "int64"})


def _sent_it(row: dict, sender: object) -> bool:
    """A `lifetime` sender (the process that sent most of the stream's bytes on a descriptor while
    it held the stream's socket) names the stream's sender over the socket samples and the kernel
    trace, which saw who held or connected the socket, not who sent on it (a server that accepts,
    then forks a child per connection); a benchmark's log stays exact."""
    return (str(getattr(sender, "source", "")) == "lifetime" and "bench" not in row["evidence"]
            and row["sender_pid"] != int(getattr(sender, "pid")))


def main_send_fds(sys_calls: pd.DataFrame | Iterable[pd.DataFrame]) -> pd.DataFrame:
    """Per pid, the fd it sent most bytes on with a send call, and the stream its description
    names ("" when the backend does not describe fds; the description of its latest call by
    entry). Columns pid, fd, stream. sys_calls: the calls, or pieces of them (each fd's totals
    are added up piece by piece)."""
    pieces = [sys_calls] if isinstance(sys_calls, pd.DataFrame) else sys_calls
    totals = [t for t in map(_send_fd_totals, pieces) if len(t)]
    if not totals:
        return pd.DataFrame(columns=["pid", "fd", "stream"])
    per = pd.concat(totals, ignore_index=True).sort_values("t_last", kind="stable")
    per = per.groupby(["pid", "fd"], sort=True).agg(b=("b", "sum"), desc=("desc", "last"))
    per = per.reset_index().sort_values(["pid", "b"], ascending=[True, False], kind="stable")
    best = per.groupby("pid").head(1)
    desc = best["desc"].astype(str)
    stream = desc.where(desc.str.contains(">", regex=False) & ~desc.str.endswith("*"), "")
    return pd.DataFrame({"pid": best["pid"].to_numpy().astype(np.int64), "fd": best["fd"].to_numpy().astype(np.int64),
                         "stream": stream.to_numpy()})


def _send_fd_totals(sys_calls: pd.DataFrame) -> pd.DataFrame:
    """Per (pid, fd) of the socket sends: bytes sent, the description of the latest call by entry
    (the last of equal entries), and its entry stamp t_last."""
    sends = sys_calls[sys_calls["call"].isin(SEND_CALLS).to_numpy()]
    sends = sends.assign(b=sent_bytes(sends))
    sends = sends[sends["b"].to_numpy() > 0]
    sends = sends[~sends["fd_kind"].astype(str).isin(["file", "pipe", "unix", "udp"]).to_numpy()]
    if len(sends) == 0:
        return pd.DataFrame(columns=["pid", "fd", "b", "desc", "t_last"])
    sends = sends.sort_values("t_enter_ns", kind="stable")
    return sends.groupby(["pid", "fd"], sort=True).agg(
        b=("b", "sum"), desc=("fd_desc", "last"), t_last=("t_enter_ns", "last")).reset_index()


# ------------------------------------------------------------------ frames, writes, backlog


def stream_bytes(data: pd.DataFrame) -> pd.DataFrame:
    """Data frames (columns t_ns, stream, seq, payload_len; flags optional) with seq_start and
    seq_end relative to the stream's first data byte (the SYN's seq + 1 when the handshake was
    captured: pass `isn` per stream in attrs["isn"], else the lowest sequence number seen), and
    retransmit (starts below the highest byte sent before). Ordered by stream, then time."""
    from hostwire.metrics.streams import unwrap_seq

    if len(data) == 0:
        return data.assign(seq_start=np.zeros(0, np.int64), seq_end=np.zeros(0, np.int64),
                           retransmit=np.zeros(0, bool))
    d = data.assign(_s=data["stream"].astype(str)).sort_values(["_s", "t_ns"], kind="stable")
    code, names = pd.factorize(d["_s"].to_numpy(), sort=False)
    seq = unwrap_seq(d["seq"].to_numpy(), code)
    isn: dict[str, int] = data.attrs.get("isn") or {}
    base = pd.Series(seq).groupby(code).transform("min").to_numpy().copy()
    for i, name in enumerate(names):
        if name in isn:
            rows = code == i
            first_raw = int(d["seq"].to_numpy()[rows][0])
            # the unwrapped value of the ISN + 1, near the stream's first seq
            delta = ((first_raw - (isn[name] + 1)) + 2**31) % 2**32 - 2**31
            base[rows] = seq[rows][0] - delta
    start = seq - base
    end = start + d["payload_len"].to_numpy().astype(np.int64)
    running_max = pd.Series(end).groupby(code).cummax().to_numpy()
    prev_max = np.empty_like(running_max)
    prev_max[1:] = running_max[:-1]
    first = np.ones(len(code), dtype=bool)
    first[1:] = code[1:] != code[:-1]
    prev_max[first] = start[first]
    out = d.drop(columns="_s").assign(seq_start=start, seq_end=end, retransmit=start < prev_max)
    return out.reset_index(drop=True)


def datagram_bytes(data: pd.DataFrame) -> pd.DataFrame:
    """UDP data frames (columns t_ns, stream, payload_len) with seq_start and seq_end, the flow's
    payload bytes before and through each datagram in the order they crossed the wire (a datagram
    has no sequence number; the capture's order is the only one there is), and retransmit (never).
    Ordered by stream, then time."""
    d = data.assign(_s=data["stream"].astype(str)).sort_values(["_s", "t_ns"], kind="stable")
    payload = d["payload_len"].to_numpy().astype(np.int64)
    end = d.groupby("_s", sort=False)["payload_len"].cumsum().to_numpy().astype(np.int64) if len(d) else payload
    return d.drop(columns="_s").assign(seq_start=end - payload, seq_end=end,
                                       retransmit=np.zeros(len(d), bool)).reset_index(drop=True)


def writes_offset(frames: pd.DataFrame, writes: pd.DataFrame) -> int:
    """The bytes a stream carried before its first known write: the least that keeps every frame
    after the writes that could have supplied its bytes (a frame at t carries no byte beyond what
    the calls entered before t wrote). 0 for a stream traced from its start."""
    if len(frames) == 0 or len(writes) == 0:
        return 0
    w = writes.sort_values("t_enter_ns", kind="stable")
    cum = np.cumsum(w["bytes"].to_numpy().astype(np.int64))
    entered = np.searchsorted(w["t_enter_ns"].to_numpy(), frames["t_ns"].to_numpy(), side="left")
    supplied = np.where(entered > 0, cum[np.maximum(entered - 1, 0)], 0)
    return int(max(0, int((frames["seq_end"].to_numpy() - supplied).max())))


def segments(frames: pd.DataFrame, writes: pd.DataFrame) -> pd.DataFrame:
    """Each data frame joined to the write(s) whose bytes it carries. frames: stream_bytes() rows;
    writes: stream, t_enter_ns, t_exit_ns, bytes (one stream's or several's). Per stream, the
    writes in entry order cover the byte ranges [cum_before, cum_after) after the stream's offset
    (writes_offset); a frame [seq_start, seq_end) overlaps writes found by searchsorted. One row
    per (frame, write) overlap: frame_t_ns, stream, seq_start, seq_end, payload_len, retransmit,
    write_id (the write's row in `writes`), t_enter_ns, t_exit_ns, bytes (of the frame in that
    write); a frame whose bytes no known write holds has one row with write_id -1."""
    out = []
    for name, f in frames.groupby("stream", sort=True, observed=True):
        w = writes[writes["stream"].astype(str).to_numpy() == str(name)]
        w = w[w["bytes"].to_numpy() > 0].sort_values("t_enter_ns", kind="stable")
        offset = writes_offset(f, w)
        after = offset + np.cumsum(w["bytes"].to_numpy().astype(np.int64))
        before = after - w["bytes"].to_numpy().astype(np.int64)
        s, e = f["seq_start"].to_numpy(), f["seq_end"].to_numpy()
        lo = np.searchsorted(after, s, side="right")
        hi = np.searchsorted(before, e, side="left")
        count = np.maximum(hi - lo, 0)
        rows = np.repeat(np.arange(len(f)), np.maximum(count, 1))
        k = np.arange(len(rows)) - np.repeat(np.cumsum(np.maximum(count, 1)) - np.maximum(count, 1), np.maximum(count, 1))
        wi = np.where(np.repeat(count, np.maximum(count, 1)) > 0, lo[rows] + k, -1)
        ok = wi >= 0
        wsafe = np.maximum(wi, 0)
        overlap = np.where(ok, np.minimum(e[rows], after[wsafe] if len(after) else 0)
                           - np.maximum(s[rows], before[wsafe] if len(before) else 0), e[rows] - s[rows])
        ids = w.index.to_numpy()
        out.append(pd.DataFrame({
            "frame_t_ns": f["t_ns"].to_numpy()[rows], "stream": str(name),
            "seq_start": s[rows], "seq_end": e[rows], "payload_len": (e - s)[rows],
            "retransmit": f["retransmit"].to_numpy()[rows],
            "write_id": np.where(ok, ids[wsafe] if len(ids) else -1, -1),
            "t_enter_ns": np.where(ok, w["t_enter_ns"].to_numpy()[wsafe] if len(w) else 0, -1),
            "t_exit_ns": np.where(ok, w["t_exit_ns"].to_numpy()[wsafe] if len(w) else 0, -1),
            "bytes": overlap}))
    if not out:
        return pd.DataFrame(columns=SEGMENT_COLUMNS)
    return pd.concat(out, ignore_index=True).sort_values(["frame_t_ns", "seq_start"], kind="stable").reset_index(
        drop=True)[SEGMENT_COLUMNS].astype({c: "int64" for c in SEGMENT_COLUMNS if c not in ("stream", "retransmit")})


def backlog(frames: pd.DataFrame, writes: pd.DataFrame) -> pd.DataFrame:
    """Per stream, the bytes written but not yet on the wire at each change: written_bytes (the
    stream's offset plus the bytes of the writes returned by t_ns), sent_bytes (the highest
    relative sequence number on the wire by t_ns), backlog_bytes = max(0, written - sent). Each
    row holds until the stream's next row. frames and writes as for segments()."""
    out = []
    for name, (t, written, sent) in _backlogs(frames, writes):
        out.append(pd.DataFrame({"t_ns": t, "written_bytes": written, "sent_bytes": sent,
                                 "backlog_bytes": np.maximum(0, written - sent), "stream": name}))
    if not out:
        return pd.DataFrame({c: pd.Series(dtype="int64" if c != "stream" else "object") for c in BACKLOG_COLUMNS})
    return pd.concat(out, ignore_index=True)[BACKLOG_COLUMNS]


def backlog_steps(frames: pd.DataFrame, writes: pd.DataFrame, rows: int | None = None) -> pd.DataFrame:
    """backlog()'s stream, t_ns and backlog_bytes alone, the stream a categorical of the names in
    name order (what the gap analysis reads of it, without a table of all its columns), made
    window by window (hostwire.timeline.backlog_windows: `rows` of each table at a time) and
    written to disk as they are made (hostwire.spill): a long run's are not held."""
    from hostwire.spill import Columns
    from hostwire.timeline.backlog_windows import WINDOW_ROWS, stream_backlog, stream_rows

    steps = Columns({"t_ns": np.int64, "backlog_bytes": np.int64})
    names: list[str] = []
    writes_of = dict(stream_rows(writes["stream"]))
    frame_columns = {c: frames[c].to_numpy() for c in ("t_ns", "seq_end")}  # mapped: views, no copy
    write_columns = {c: writes[c].to_numpy() for c in ("t_enter_ns", "t_exit_ns", "bytes")}
    for name, of_frames in stream_rows(frames["stream"]):
        of_writes = writes_of.get(name, slice(0, 0))
        for t, level in stream_backlog({c: v[of_frames] for c, v in frame_columns.items()},
                                       {c: v[of_writes] for c, v in write_columns.items()}, rows or WINDOW_ROWS):
            steps.append(len(names), t_ns=t, backlog_bytes=level)
        names.append(name)
    return steps.table(pd.Index(names, dtype=object), list(range(len(names))))  # every stream, rows or not


def _backlogs(frames: pd.DataFrame, writes: pd.DataFrame) -> Iterator[tuple[str, tuple[np.ndarray, ...]]]:
    """Per stream with frames, in name order: the stamps at which its backlog changes, and the
    bytes written and sent by each (the last of equal stamps)."""
    from hostwire.timeline.backlog_windows import stream_rows

    writes_of = dict(stream_rows(writes["stream"]))
    for name, f in frames.groupby("stream", sort=True, observed=True):
        w = writes.iloc[writes_of.get(str(name), slice(0, 0))]
        w = w[w["bytes"].to_numpy() > 0]
        offset = writes_offset(f, w.sort_values("t_enter_ns", kind="stable"))
        t = np.concatenate([w["t_exit_ns"].to_numpy(), f["t_ns"].to_numpy()]).astype(np.int64)
        dw = np.concatenate([w["bytes"].to_numpy(), np.zeros(len(f))]).astype(np.int64)
        hs = np.concatenate([np.zeros(len(w)), f["seq_end"].to_numpy()]).astype(np.int64)
        order = np.argsort(t, kind="stable")
        t, dw, hs = t[order], dw[order], hs[order]
        written = offset + np.cumsum(dw)
        sent = np.maximum.accumulate(hs) if len(hs) else hs
        last = np.r_[t[1:] != t[:-1], True] if len(t) else np.zeros(0, bool)  # the last row of each stamp
        yield str(name), (t[last], written[last], sent[last])
