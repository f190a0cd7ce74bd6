"""The streams of a program recorded by `hostwire record`, named and owned from the sockets its
processes held (raw/sockets.tsv: hostwire.read.sockets): each stream of the capture, TCP or UDP,
IPv4 or IPv6, in its data direction, with the process (pid, comm) and descriptor that sent it and,
when the receiving end was the program's (a server's requests, a client's downloads, loopback),
the process that received it."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from hostwire.metrics.chunked.labels import Connections
from hostwire.metrics.streams import TCP, label_streams
from hostwire.read.pcapchunks import CaptureChunks
from hostwire.read.sockets import PROTO_NUMBERS, socket_keys

UDP = 17
SENDER_COLUMNS = ["role", "pid", "local", "peer", "fd"]
RECEIVER_COLUMNS = ["role", "pid", "sender_pid", "stream"]


def _host(addr: object) -> str:
    text = str(addr)
    return f"[{text}]" if ":" in text else text


def stream_names(frames: pd.DataFrame) -> pd.DataFrame:
    """Every stream of the capture: proto, stream (local>remote in the direction that carries the
    payload; TCP as hostwire.metrics.streams names connections, UDP one stream per direction that
    carries payload)."""
    rows = []
    if len(frames) and (frames["proto"].to_numpy() == TCP).any():
        names = label_streams(frames)["stream"].cat.categories
        rows += [(TCP, str(n)) for n in names]
    udp = frames[(frames["proto"].to_numpy() == UDP) & (frames["payload_len"].to_numpy() > 0)]
    if len(udp):
        ends = udp[["src", "sport", "dst", "dport"]].drop_duplicates()
        rows += [(UDP, f"{_host(s)}:{sp}>{_host(d)}:{dp}") for s, sp, d, dp in ends.itertuples(index=False)]
    return pd.DataFrame(rows, columns=["proto", "stream"])


def stream_names_in_chunks(capture: CaptureChunks) -> pd.DataFrame:
    """stream_names of a capture read in chunks: the TCP connections named by the chunked labels'
    rule (hostwire.metrics.chunked.labels), which is label_streams'; the UDP ends in the order
    they first carried payload."""
    columns = ("t_ns", "proto", "src", "dst", "sport", "dport", "payload_len")
    conns, udp_ends = Connections(), {}
    for chunk in capture.time_ordered(columns, lambda c: c["proto"] == TCP):  # a tie: the first frame's direction
        conns.add(chunk)
    for chunk in capture.chunks(columns):  # the capture's order, as drop_duplicates keeps it
        udp = np.flatnonzero((chunk["proto"] == UDP) & (chunk["payload_len"] > 0))
        ends = pd.DataFrame({k: chunk[k][udp] for k in ("src", "sport", "dst", "dport")}).drop_duplicates()
        udp_ends.update(dict.fromkeys(ends.itertuples(index=False, name=None)))
    tcp_names = sorted(conns.named(capture.addresses)[1]) if conns.fwd_bytes else []
    a = capture.addresses
    rows = [(TCP, n) for n in tcp_names] + [(UDP, f"{_host(a[s])}:{sp}>{_host(a[d])}:{dp}") for s, sp, d, dp in udp_ends]
    return pd.DataFrame(rows, columns=["proto", "stream"])


def _socket_fds(sockets: pd.DataFrame) -> dict[tuple[int, int, str], int]:
    """(pid, proto, local endpoint) -> the descriptor that held it last."""
    out: dict[tuple[int, int, str], int] = {}
    for row in sockets.itertuples(index=False):
        out[(int(row.pid), PROTO_NUMBERS[row.proto], str(row.local))] = int(row.fd)
    return out


def owners(names: pd.DataFrame, sockets: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The streams' (names: stream_names) senders (role = comm, pid, local, peer, fd) and receivers
    (role, pid, sender_pid: -1 when the sender was not the program's, stream) among the program's
    processes, for hostwire.timeline.stream_tables.streams_table."""
    senders, receivers = [], []
    if len(sockets) == 0:
        return pd.DataFrame(senders, columns=SENDER_COLUMNS), pd.DataFrame(receivers, columns=RECEIVER_COLUMNS)
    keys = socket_keys(sockets)
    fds = _socket_fds(sockets)
    for proto, stream in names.itertuples(index=False):
        local, _, remote = stream.partition(">")
        port = ":" + local.rpartition(":")[2]
        sender = next((keys[k] for k in ((proto, local, remote), (proto, local), (proto, port)) if k in keys), None)
        if sender is not None:
            fd = next((fds[(sender[0], proto, cand)] for cand in (local, "0.0.0.0" + port, "[::]" + port)
                       if (sender[0], proto, cand) in fds), -1)
            senders.append({"role": sender[1], "pid": sender[0], "local": local, "peer": remote, "fd": fd})
        rport = ":" + remote.rpartition(":")[2]
        receiver = next((keys[k] for k in ((proto, remote, local), (proto, remote), (proto, rport)) if k in keys),
                        None)
        if receiver is not None and receiver != sender:
            receivers.append({"role": receiver[1], "pid": receiver[0], "sender_pid": sender[0] if sender else -1,
                              "stream": stream})
    return (pd.DataFrame(senders, columns=SENDER_COLUMNS),
            pd.DataFrame(receivers, columns=RECEIVER_COLUMNS).astype({"pid": np.int64, "sender_pid": np.int64}))


def lifetime_senders(pieces: Iterable[pd.DataFrame], epochs: pd.DataFrame) -> pd.DataFrame:
    """Per stream an epoch names (hostwire.timeline.fd_lifetimes), the process that sent most of
    its bytes and the fd it sent them on: pid, fd, stream, source (`lifetime`). pieces: the send
    calls, a piece at a time."""
    from hostwire.timeline.fd_lifetimes import call_streams

    totals = []
    for piece in pieces:
        sends = piece[pd.to_numeric(piece["result"], errors="coerce").fillna(0).to_numpy() > 0]
        stream, _ = call_streams(sends, epochs)
        named = stream != ""
        if named.any():
            totals.append(pd.DataFrame({"stream": stream[named], "pid": sends["pid"].to_numpy()[named],
                                        "fd": sends["fd"].to_numpy()[named],
                                        "b": pd.to_numeric(sends["result"], errors="coerce").to_numpy()[named]}))
    if not totals:
        return pd.DataFrame({"pid": pd.Series(dtype=np.int64), "fd": pd.Series(dtype=np.int64),
                             "stream": pd.Series(dtype=object), "source": pd.Series(dtype=object)})
    per = pd.concat(totals).groupby(["stream", "pid", "fd"], as_index=False)["b"].sum()
    best = per.sort_values(["stream", "b"], ascending=[True, False], kind="stable").groupby("stream").head(1)
    return best[["pid", "fd", "stream"]].assign(source="lifetime").astype({"pid": np.int64, "fd": np.int64})


def process_comms(pids: set[int], tasks: dict | None, sched: pd.DataFrame | None) -> dict[int, str]:
    """pid -> comm of these processes: the recorded program's tasks (the manifest's, tid -> comm:
    the socket sampler saw them), else the name the kernel trace (t_ns, pid, comm) last ran the pid
    under (a child that lived between two samples); a pid neither names is left out."""
    out = {int(t): str(c) for t, c in (tasks or {}).items() if str(t).isdigit() and int(t) in pids}
    rest = pids - set(out)
    if rest and sched is not None and len(sched):
        of = sched[np.isin(sched["pid"].to_numpy(), list(rest))].sort_values("t_ns", kind="stable")
        out.update({int(p): str(c) for p, c in of.groupby("pid")["comm"].last().items()})
    return out
