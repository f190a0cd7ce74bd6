"""The flows of an unconnected UDP socket's sends (docs/timeline.md, "Datagrams of one socket to
many peers"): a server that answers every client from one bound socket (a DNS server) sends each
datagram to the address its sendto/sendmsg names, which the tracer does not record, so its
descriptor alone cannot tell the flows apart. Each send call is joined to the next datagram its
socket's local endpoint put on the wire: in call order, the first datagram not yet taken that
crossed the wire after the call entered and carries as many bytes as the call sent."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from hostwire.read.send_styles import SEND_CALLS, sent_bytes

MATCH_COLUMNS = ["pid", "tid", "t_enter_ns", "stream"]
WILDCARDS = ("0.0.0.0", "[::]", "::", "*")
# the datagrams not yet taken that one call is matched among: those never taken were sent by calls
# the tracer did not see (sendmmsg's several, another program's on the same port)
LOOKAHEAD = 64


def unconnected_udp(samples: pd.DataFrame | None) -> pd.DataFrame:
    """The sampled UDP sockets with no peer (remote a wildcard, port 0): pid, fd, local."""
    cols = ["pid", "fd", "local"]
    if samples is None or len(samples) == 0:
        return pd.DataFrame(columns=cols)
    udp = samples[(samples["proto"].astype(str) == "udp").to_numpy()
                  & samples["remote"].astype(str).str.endswith(":0").to_numpy()]
    return udp[cols].drop_duplicates(["pid", "fd"], keep="last").reset_index(drop=True)


def sends_on(pieces: Iterable[pd.DataFrame], sockets: pd.DataFrame) -> pd.DataFrame:
    """The send calls (among pieces of calls, hostwire.read.syscalls columns) on these sockets
    (unconnected_udp) that sent bytes: pid, tid, fd, t_enter_ns, bytes."""
    key = pd.MultiIndex.from_arrays([sockets["pid"].to_numpy().astype(np.int64),
                                     sockets["fd"].to_numpy().astype(np.int64)])
    out = []
    for piece in pieces:
        on = pd.MultiIndex.from_arrays([piece["pid"].to_numpy().astype(np.int64),
                                        piece["fd"].to_numpy().astype(np.int64)]).isin(key)
        on &= piece["call"].isin(SEND_CALLS).to_numpy()
        sends = piece[on][["pid", "tid", "fd", "t_enter_ns"]].assign(bytes=sent_bytes(piece[on]))
        out.append(sends[sends["bytes"].to_numpy() > 0])
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=["pid", "tid", "fd", "t_enter_ns",
                                                                               "bytes"])


def _local_datagrams(datagrams: pd.DataFrame, local: str) -> pd.DataFrame:
    """The UDP data frames a socket bound to `local` (ip:port, the ip possibly a wildcard) sent."""
    host, _, port = local.rpartition(":")
    mine = (datagrams["proto"].to_numpy() == 17) & (datagrams["sport"].to_numpy().astype(np.int64) == int(port))
    if host not in WILDCARDS:
        mine &= datagrams["src"].astype(str).str.strip("[]").to_numpy() == host.strip("[]")
    order = ["t_ns", "frame"] if "frame" in datagrams.columns else ["t_ns"]  # a tie: the capture's order
    return datagrams[mine].sort_values(order, kind="stable")


def pair_in_order(enter: np.ndarray, sent: np.ndarray, t_wire: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Per call (entry stamps `enter`, bytes `sent`, in entry order), the datagram (stamps `t_wire`,
    payloads `size`, in wire order) it is joined to, -1 none: the first datagram not taken by an
    earlier call, among the LOOKAHEAD first that crossed the wire after the call entered (one that
    crossed before cannot be this call's, nor a later one's), that carries the call's bytes. When
    every call's datagram is simply the next one, that is found without a loop."""
    n = min(len(enter), len(t_wire))
    if n == len(enter) and np.array_equal(size[:n], sent) and (t_wire[:n] >= enter).all():
        return np.arange(n)
    out = np.full(len(enter), -1, dtype=np.int64)
    taken = np.zeros(len(t_wire), dtype=bool)
    first_after = np.searchsorted(t_wire, enter, side="left")
    for i in range(len(enter)):
        lo = int(first_after[i])
        free = lo + np.flatnonzero(~taken[lo:lo + 4 * LOOKAHEAD])[:LOOKAHEAD]
        fits = free[size[free] == sent[i]]
        if len(fits):
            out[i] = fits[0]
            taken[fits[0]] = True
    return out


def datagram_sends(sends: pd.DataFrame, sockets: pd.DataFrame, datagrams: pd.DataFrame) -> pd.DataFrame:
    """The send calls on unconnected UDP sockets joined to their datagrams' flows: MATCH_COLUMNS,
    one row per joined call. sends: the send calls (pid, tid, fd, t_enter_ns, bytes; those with a
    stream already are the caller's to leave out); sockets: unconnected_udp(); datagrams: the data
    frames (t_ns, proto, src, sport, payload_len, stream)."""
    if len(sends) == 0 or len(sockets) == 0 or len(datagrams) == 0:
        return pd.DataFrame(columns=MATCH_COLUMNS)
    out = []
    for local, held in sockets.groupby("local", sort=True):
        on = sends[pd.MultiIndex.from_arrays([sends["pid"].to_numpy(), sends["fd"].to_numpy()]).isin(
            pd.MultiIndex.from_arrays([held["pid"].to_numpy(), held["fd"].to_numpy()]))]
        on = on[on["bytes"].to_numpy() > 0].sort_values("t_enter_ns", kind="stable")
        wire = _local_datagrams(datagrams, str(local))
        if len(on) == 0 or len(wire) == 0:
            continue
        at = pair_in_order(on["t_enter_ns"].to_numpy().astype(np.int64), on["bytes"].to_numpy().astype(np.int64),
                           wire["t_ns"].to_numpy().astype(np.int64), wire["payload_len"].to_numpy().astype(np.int64))
        hit = at >= 0
        out.append(pd.DataFrame({"pid": on["pid"].to_numpy()[hit], "tid": on["tid"].to_numpy()[hit],
                                 "t_enter_ns": on["t_enter_ns"].to_numpy()[hit],
                                 "stream": wire["stream"].astype(str).to_numpy()[at[hit]]}))
    if not out:
        return pd.DataFrame(columns=MATCH_COLUMNS)
    joined = pd.concat(out, ignore_index=True).astype({"pid": np.int64, "tid": np.int64, "t_enter_ns": np.int64})
    return joined.drop_duplicates(["pid", "tid", "t_enter_ns"]).reset_index(drop=True)


def join(calls: pd.DataFrame, stream: np.ndarray, matched: pd.DataFrame | None) -> np.ndarray:
    """`stream` (per call) with the matched sends' flows where it names none."""
    if matched is None or len(matched) == 0 or len(calls) == 0:
        return stream
    key = pd.MultiIndex.from_arrays([matched[c].to_numpy().astype(np.int64) for c in ("pid", "tid", "t_enter_ns")])
    idx = key.get_indexer(pd.MultiIndex.from_arrays([calls[c].to_numpy().astype(np.int64)
                                                     for c in ("pid", "tid", "t_enter_ns")]))
    hit = (idx >= 0) & (stream == "")
    out = stream.copy()
    out[hit] = matched["stream"].to_numpy()[idx[hit]]
    return out
