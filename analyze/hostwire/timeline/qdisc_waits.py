"""Where the kernel below TCP holds a stream's next frame (docs/timeline.md, "Gaps"): in the
device's queueing discipline (`qdisc`), or on the stack's own path from the event that released
the bytes to the frame leaving (`send_path`). Both are read from the kernel trace's `tcp_probe`
events: TCP's own state of the sending socket each time it processes an incoming segment
(its acknowledgements), with `snd_nxt`, the highest byte TCP has handed down, and the incoming
segment's `skbaddr`, which names its `netif_receive_skb` (the receive softirq taking it in).

- qdisc, per data frame b of a stream that is not a retransmission: [q, b) where q is the first
  probe of the sender's socket whose snd_nxt had passed b's last byte. TCP had sent b by q, and
  the capture, which taps the device as the queueing discipline hands each frame to it, had not
  seen it: b sat in the queueing discipline (a shaper's rate or queue, fq's pacing). The probes
  come with the acknowledgements, so q is when the kernel first showed b below TCP, no earlier
  than when TCP sent it.
- send_path, per data frame b: [r, b) where r is the latest release before b, at most
  `RELEASE_NS` before it: the receive softirq taking in an incoming segment of the stream that
  TCP then processed (its netif_receive_skb, else the probe's own stamp), or the entry of a send
  call on the stream. From there to b the stack was moving the bytes (TCP's processing, IP, the
  device).

A probe names its socket by both endpoints (`saddr`, `daddr`: the kernel's sockaddr in hex) and
ports; a stream's sender socket is the one whose local end is the stream's source.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Iterator

import numpy as np
import pandas as pd

from hostwire.spill import Columns
from hostwire.timeline.tcp_waits import RELEASE_NS

PROBE_COLUMNS = ["t_ns", "local", "sport", "remote", "dport", "snd_nxt", "received_ns"]
# what the kernel trace's reader must keep of an event for probes()
TRACE_COLUMNS = ("saddr", "daddr", "sport", "dport", "snd_nxt", "skbaddr")
AF_INET, AF_INET6 = 2, 10


def empty_probes() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="object" if c in ("local", "remote") else "int64") for c in PROBE_COLUMNS})


def empty_intervals() -> pd.DataFrame:
    return pd.DataFrame({"stream": pd.Series(dtype=str), "t_start_ns": pd.Series(dtype=np.int64),
                         "t_end_ns": pd.Series(dtype=np.int64)})


def sockaddr_text(hex_text: str) -> str:
    """The address of a tcp_probe sockaddr field (hex of struct sockaddr_in or sockaddr_in6);
    empty when it is neither."""
    try:
        raw = bytes.fromhex(hex_text)
    except ValueError:
        return ""
    family = int.from_bytes(raw[:2], "little") if len(raw) >= 2 else 0
    if family == AF_INET and len(raw) >= 8:
        return str(ipaddress.IPv4Address(raw[4:8]))
    if family == AF_INET6 and len(raw) >= 24:
        v6 = ipaddress.IPv6Address(raw[8:24])
        return str(v6.ipv4_mapped) if v6.ipv4_mapped is not None else str(v6)
    return ""


def _addresses(column: pd.Series) -> np.ndarray:
    text = column.astype(str)
    names = {v: sockaddr_text(v) for v in pd.unique(text)}
    return text.map(names).to_numpy(dtype=object)


def probes(events: pd.DataFrame, received: tuple[np.ndarray, np.ndarray] | None = None
           ) -> tuple[pd.DataFrame, tuple[np.ndarray, np.ndarray]]:
    """The tcp_probe events of a time-ordered piece of the kernel trace (PROBE_COLUMNS), each with
    received_ns, the stamp of the netif_receive_skb of its segment (same skbaddr) at most
    RELEASE_NS before it, else its own stamp; and the piece's last RELEASE_NS of netif_receive_skb
    (stamps, skbaddr codes), to carry into the next piece (received: the carry of the one before),
    so that a trace read in slabs gives the whole trace's rows."""
    ev = events["event"]
    is_probe = np.asarray(ev.isin(["tcp_probe"]), dtype=bool)
    is_rx = np.asarray(ev.isin(["netif_receive_skb"]), dtype=bool)
    t = events["t_ns"].to_numpy().astype(np.int64)
    has_skb = "skbaddr" in events.columns
    rx_t = t[is_rx]
    rx_key = _skb_keys(events["skbaddr"][is_rx]) if has_skb else np.zeros(len(rx_t), np.int64)
    if received is not None:
        rx_t, rx_key = np.r_[received[0], rx_t], np.r_[received[1], rx_key]
    last = rx_t[-1] if len(rx_t) else 0
    keep = rx_t >= last - RELEASE_NS
    carry = (rx_t[keep], rx_key[keep])
    if not is_probe.any() or "snd_nxt" not in events.columns:
        return empty_probes(), carry
    p = events[is_probe]
    pt = t[is_probe]
    received_ns = pt.copy()
    if has_skb and len(rx_t):
        # the latest reception of the same buffer at or before each probe: rows by buffer, time,
        # then kind (a reception before a probe of the same stamp)
        keys = np.r_[rx_key, _skb_keys(p["skbaddr"])]
        times = np.r_[rx_t, pt]
        kind = np.r_[np.zeros(len(rx_t), np.int64), np.ones(len(pt), np.int64)]
        order = np.lexsort((kind, times, keys))
        keys, times, kind = keys[order], times[order], kind[order]
        last_rx = np.maximum.accumulate(np.where(kind == 0, np.arange(len(kind)), -1))
        at = np.maximum(last_rx, 0)
        near = (kind == 1) & (last_rx >= 0) & (keys[at] == keys) & (times - times[at] <= RELEASE_NS)
        got = np.full(len(kind), -1, np.int64)
        got[near] = times[at][near]
        probe_got = np.empty(len(pt), np.int64)
        probe_got[order[kind == 1] - len(rx_t)] = got[kind == 1]
        received_ns = np.where(probe_got >= 0, probe_got, pt)
    table = pd.DataFrame({"t_ns": pt, "local": _addresses(p["saddr"]), "sport": _ints(p["sport"]),
                          "remote": _addresses(p["daddr"]), "dport": _ints(p["dport"]),
                          "snd_nxt": _ints(p["snd_nxt"]), "received_ns": received_ns})
    return table, carry


def _ints(column: pd.Series) -> np.ndarray:
    return pd.to_numeric(column, errors="coerce").fillna(-1).to_numpy().astype(np.int64)


def _skb_keys(column: pd.Series) -> np.ndarray:
    """A buffer address ("0xffff...") as an integer key (its low 62 bits: unique among live buffers)."""
    text = column.astype(str)
    keys = {v: int(v, 16) & ((1 << 62) - 1) if v.startswith("0x") else -1 for v in pd.unique(text)}
    return text.map(keys).to_numpy(dtype=np.int64)


def joined_probes(pieces: Iterable[pd.DataFrame]) -> pd.DataFrame:
    parts = [p for p in pieces if len(p)]
    return pd.concat(parts, ignore_index=True) if parts else empty_probes()


class SpilledProbes:
    """The probes of a trace read in slabs, each slab's written to scratch files as it comes (no
    small table of every slab is held among the slabs' large freed ones: hostwire.spill), the
    addresses as codes of the few there are."""

    def __init__(self) -> None:
        self.columns = Columns({c: np.int64 for c in PROBE_COLUMNS})
        self.addresses: dict[str, int] = {}

    def add(self, found: pd.DataFrame) -> None:
        if len(found) == 0:
            return
        codes = {c: np.asarray([self.addresses.setdefault(str(a), len(self.addresses)) for a in found[c]], np.int64)
                 for c in ("local", "remote")}
        self.columns.append(0, **{c: codes[c] if c in codes else found[c].to_numpy() for c in PROBE_COLUMNS})

    def table(self) -> pd.DataFrame:
        if not self.columns.rows:
            return empty_probes()
        joined = self.columns.joined()
        names = np.asarray(list(self.addresses), dtype=object)
        return pd.DataFrame({c: names[joined[c]] if c in ("local", "remote") else joined[c] for c in PROBE_COLUMNS},
                            copy=False)


def stream_ends(name: str) -> tuple[str, int, str, int] | None:
    """(src, sport, dst, dport) of a stream named src:sport>dst:dport (IPv6 in brackets; a UDP
    flow's ` udp` suffix dropped); None when the name is not one."""
    src, sep, dst = name.removesuffix(" udp").partition(">")
    if not sep:
        return None
    try:
        (a, p), (b, q) = (_endpoint(src), _endpoint(dst))
    except ValueError:
        return None
    return a, p, b, q


def _endpoint(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def qdisc_holds(probe_rows: pd.DataFrame, data: pd.DataFrame, bases: dict[str, int]) -> pd.DataFrame:
    """The qdisc intervals (stream, t_start_ns, t_end_ns) of the module doc. data: the data frames
    (t_ns, stream, seq_end relative to the stream's base); bases: stream -> the absolute sequence
    number of its relative byte 0 (a stream without one gets none)."""
    out = [empty_intervals()]
    if len(probe_rows) == 0 or "seq_end" not in data.columns:
        return out[0]
    by_socket = probe_rows.groupby(["local", "sport", "remote", "dport"], sort=False).indices
    for name, rows in _streams(data):
        ends = stream_ends(name)
        if ends is None or name not in bases or name.endswith(" udp"):
            continue
        at = by_socket.get(ends)
        if at is None:
            continue
        p = probe_rows.iloc[np.sort(at)].sort_values("t_ns", kind="stable")
        t, seq_end = rows
        assert seq_end is not None
        pt = p["t_ns"].to_numpy()
        # snd_nxt relative to the base, unwrapped near what the capture had seen by then
        seen = np.maximum.accumulate(seq_end)
        before = np.searchsorted(t, pt, side="right") - 1
        near = np.where(before >= 0, seen[np.maximum(before, 0)], 0)
        raw = (p["snd_nxt"].to_numpy() - bases[name]) % (1 << 32)
        rel = near + ((raw - near + (1 << 31)) % (1 << 32) - (1 << 31))
        sent = np.maximum.accumulate(rel)
        new = seq_end > np.r_[np.iinfo(np.int64).min, seen[:-1]]  # not a retransmission
        k = np.searchsorted(sent, seq_end[new], side="left")
        found = k < len(pt)
        q = pt[np.minimum(k, len(pt) - 1)]
        b = t[new]
        hold = found & (q < b)
        out.append(pd.DataFrame({"stream": name, "t_start_ns": q[hold], "t_end_ns": b[hold]}))
    return pd.concat(out, ignore_index=True)


def send_paths(probe_rows: pd.DataFrame, data: pd.DataFrame, sends: pd.DataFrame | None) -> pd.DataFrame:
    """The send_path intervals (stream, t_start_ns, t_end_ns) of the module doc. data: t_ns,
    stream; sends: stream, t_enter_ns (the send calls), or None."""
    out = [empty_intervals()]
    by_socket = probe_rows.groupby(["local", "sport", "remote", "dport"], sort=False).indices if len(probe_rows) else {}
    calls = dict(_calls(sends)) if sends is not None and len(sends) else {}
    for name, (t, _) in _streams(data, with_seq=False):
        releases = [calls.get(name, np.zeros(0, np.int64))]
        ends = stream_ends(name)
        at = by_socket.get(ends) if ends is not None and not name.endswith(" udp") else None
        if at is not None:
            releases.append(probe_rows["received_ns"].to_numpy()[at])
        r = np.sort(np.concatenate(releases))
        if len(r) == 0:
            continue
        k = np.searchsorted(r, t, side="left") - 1  # the latest release before each frame
        ok = k >= 0
        last = np.where(ok, r[np.maximum(k, 0)], 0)
        ok &= t - last <= RELEASE_NS
        out.append(pd.DataFrame({"stream": name, "t_start_ns": last[ok], "t_end_ns": t[ok]}))
    return pd.concat(out, ignore_index=True)


def _streams(data: pd.DataFrame, with_seq: bool = True) -> Iterator[tuple[str, tuple[np.ndarray, np.ndarray | None]]]:
    """(name, (t_ns, seq_end or None)) of each stream of the data frames, in time order."""
    stream = data["stream"]
    codes, names = (stream.cat.codes.to_numpy(), stream.cat.categories) if isinstance(
        stream.dtype, pd.CategoricalDtype) else pd.factorize(stream.astype(str))
    t_all = data["t_ns"].to_numpy().astype(np.int64)
    seq_all = data["seq_end"].to_numpy().astype(np.int64) if with_seq else None
    order = np.lexsort((t_all, codes))
    bounds = np.flatnonzero(np.diff(codes[order], prepend=-2, append=-2) != 0)
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        rows = order[lo:hi]
        code = int(codes[rows[0]])
        if code < 0:
            continue
        yield str(names[code]), (t_all[rows], seq_all[rows] if seq_all is not None else None)


def _calls(sends: pd.DataFrame) -> Iterator[tuple[str, np.ndarray]]:
    """(name, the entries of its send calls, sorted) of each stream."""
    grouped = pd.DataFrame({"stream": sends["stream"].astype(str).to_numpy(),
                            "t": sends["t_enter_ns"].to_numpy().astype(np.int64)}).groupby("stream", sort=False)["t"]
    for name, t in grouped:
        yield str(name), np.sort(t.to_numpy())
