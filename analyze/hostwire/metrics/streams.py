"""Streams of a capture: one TCP connection named by its 4-tuple in the direction that carries its
payload (DESIGN.md section 5). Names look like `198.18.0.1:40000>198.18.0.2:5001`, IPv6 addresses
in brackets (`[fd00::1]:40000>[fd00::2]:5001`). label_flows names UDP flows the same way."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from hostwire.errors import InputError

TCP = 6
UDP = 17
FRAME_COLUMNS = ("t_ns", "ip_len", "proto", "src", "dst", "sport", "dport", "seq", "ack", "window",
                 "payload_len")


def check_columns(frames: pd.DataFrame, needed: Sequence[str] = FRAME_COLUMNS, what: str = "frames") -> None:
    missing = [c for c in needed if c not in frames.columns]
    if missing:
        raise InputError(f"{what}: missing column(s) {', '.join(missing)}")


def _address_codes(frames: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Integer codes of src and dst over one shared list of address strings."""
    src = frames["src"].astype("category")
    dst = frames["dst"].astype("category")
    src_names = pd.Index(src.cat.categories.astype(str))
    dst_names = pd.Index(dst.cat.categories.astype(str))
    names = src_names.union(dst_names)
    # Recode through the (few) categories, not the (many) rows.
    src_codes = names.get_indexer(src_names)[src.cat.codes.to_numpy()].astype(np.int64)
    dst_codes = names.get_indexer(dst_names)[dst.cat.codes.to_numpy()].astype(np.int64)
    return src_codes, dst_codes, names.to_numpy()


def label_streams(frames: pd.DataFrame) -> pd.DataFrame:
    """The TCP frames of a capture, time-ordered, with columns added:
    `stream` (categorical name in the data direction), `data_dir` (the frame travels in the data
    direction) and `is_data` (data_dir and payload_len > 0). Raises when there is no TCP frame."""
    check_columns(frames)
    tcp = frames[frames["proto"].to_numpy() == TCP]
    if len(tcp) == 0:
        raise InputError(f"no TCP frames among {len(frames)} frame(s): nothing to measure")
    return _label(tcp)


def label_flows(frames: pd.DataFrame) -> pd.DataFrame:
    """The TCP and the UDP frames of a capture, labelled as label_streams labels TCP: a UDP flow is
    its 4-tuple, named in the direction that carried more payload (the first frame's when neither
    did). A UDP flow whose name a TCP stream already has is named with ` udp` appended, so the two
    never merge. Raises when there is no TCP or UDP frame."""
    check_columns(frames)
    proto = frames["proto"].to_numpy()
    parts = [_label(frames[proto == p]) for p in (TCP, UDP) if (proto == p).any()]
    if not parts:
        raise InputError(f"no TCP or UDP frames among {len(frames)} frame(s): nothing to measure")
    if len(parts) == 1:
        return parts[0]
    tcp, udp = parts
    taken = set(tcp["stream"].cat.categories)
    udp = udp.assign(stream=udp["stream"].cat.rename_categories(
        lambda n: f"{n} udp" if n in taken else n))
    names = sorted(taken | set(udp["stream"].cat.categories))
    # recoded through the (few) names, not the (many) rows: no string per frame
    position = {name: i for i, name in enumerate(names)}
    codes = np.concatenate([np.asarray([position[n] for n in part["stream"].cat.categories],
                                       dtype=np.int64)[part["stream"].cat.codes.to_numpy()] for part in (tcp, udp)])
    column = list(tcp.columns).index("stream")
    both = pd.concat([tcp.drop(columns="stream"), udp.drop(columns="stream")], ignore_index=True)
    order = np.argsort(both["t_ns"].to_numpy(), kind="stable")
    both = both.take(order).reset_index(drop=True)
    both.insert(column, "stream", pd.Categorical.from_codes(codes[order], categories=pd.Index(names)))
    return both


def _label(tcp: pd.DataFrame) -> pd.DataFrame:
    """label_streams' work on the frames of one protocol (at least one frame)."""
    tcp = tcp.sort_values("t_ns", kind="stable").reset_index(drop=True)
    src_codes, dst_codes, names = _address_codes(tcp)
    sport = tcp["sport"].to_numpy().astype(np.int64)
    dport = tcp["dport"].to_numpy().astype(np.int64)
    src_ep = src_codes * 65536 + sport
    dst_ep = dst_codes * 65536 + dport
    lo = np.minimum(src_ep, dst_ep)
    hi = np.maximum(src_ep, dst_ep)
    span = int(hi.max()) + 1
    if span < 2**31:
        conn, _ = pd.factorize(lo * span + hi, sort=False)
    else:  # very many addresses: factorize the pairs
        conn, _ = pd.factorize(pd.MultiIndex.from_arrays([lo, hi]), sort=False)
    conn = conn.astype(np.int64)
    forward = src_ep == lo
    payload = tcp["payload_len"].to_numpy().astype(np.int64)
    nconn = int(conn.max()) + 1
    fwd_bytes = np.bincount(conn, weights=payload * forward, minlength=nconn)
    rev_bytes = np.bincount(conn, weights=payload * ~forward, minlength=nconn)
    # Without payload either way (a starved connection), the direction of its first frame.
    first_idx = np.full(nconn, len(conn), dtype=np.int64)
    np.minimum.at(first_idx, conn, np.arange(len(conn)))
    first_fwd = forward[first_idx]
    data_fwd = np.where(fwd_bytes > rev_bytes, True, np.where(rev_bytes > fwd_bytes, False, first_fwd))
    data_dir = forward == data_fwd[conn]
    # Name each connection once, from one of its data-direction (or any) frames.
    rep = first_idx.copy()
    dd_idx = np.flatnonzero(data_dir)
    rep_dd = np.full(nconn, -1, dtype=np.int64)
    rep_dd[conn[dd_idx][::-1]] = dd_idx[::-1]
    has_dd = rep_dd >= 0
    rep[has_dd] = rep_dd[has_dd]
    rep_dir = data_dir[rep]
    a_code = np.where(rep_dir, src_codes[rep], dst_codes[rep])
    b_code = np.where(rep_dir, dst_codes[rep], src_codes[rep])
    a_port = np.where(rep_dir, sport[rep], dport[rep])
    b_port = np.where(rep_dir, dport[rep], sport[rep])
    labels = [f"{host_label(names[a])}:{ap}>{host_label(names[b])}:{bp}"
              for a, ap, b, bp in zip(a_code, a_port, b_code, b_port)]  # one per connection
    out = tcp.assign(
        stream=pd.Categorical.from_codes(conn, categories=pd.Index(labels).astype(str)).reorder_categories(
            sorted(labels)),
        data_dir=data_dir,
        is_data=data_dir & (payload > 0),
    )
    return out


def host_label(addr: object) -> str:
    text = str(addr)
    return f"[{text}]" if ":" in text else text


def selected_names(names: Sequence[str], wanted: Sequence[str] | None) -> set[str]:
    """The stream names that `wanted` names: a full stream name or a port number of either end
    (all of them when nothing is wanted); an item naming none is an InputError."""
    if not wanted:
        return set(names)
    keep: set[str] = set()
    for item in wanted:
        matched = [n for n in names if n == item or (item.isdigit() and has_port(n, int(item)))]
        if not matched:
            raise InputError(f"--stream {item}: no such stream; streams are: {', '.join(names) or 'none'}")
        keep.update(matched)
    return keep


def select_streams(labelled: pd.DataFrame, wanted: Sequence[str] | None) -> pd.DataFrame:
    """Keep the streams named in `wanted` (selected_names)."""
    if not wanted:
        return labelled
    keep = selected_names([str(n) for n in labelled["stream"].cat.categories], wanted)
    out = labelled[labelled["stream"].isin(keep).to_numpy()]
    return out.assign(stream=out["stream"].cat.remove_unused_categories())


def has_port(name: str, port: int) -> bool:
    a, _, b = name.partition(">")
    return a.rsplit(":", 1)[-1] == str(port) or b.rsplit(":", 1)[-1] == str(port)


def stream_names(labelled: pd.DataFrame) -> list[str]:
    return [str(n) for n in labelled["stream"].cat.categories]


def data_frames(labelled: pd.DataFrame) -> pd.DataFrame:
    """The data frames (payload > 0, data direction) of labelled frames, time-ordered."""
    return labelled[labelled["is_data"].to_numpy()]


def seq_offset(seq: np.ndarray, base: np.ndarray) -> np.ndarray:
    """32-bit sequence numbers as signed offsets from a base, within half the sequence space each
    way: a number just past a wrap lies above the base, a resend of earlier bytes below it."""
    return (np.asarray(seq).astype(np.int64) - base + 2**31) % 2**32 - 2**31


def unwrap_seq(seq: np.ndarray, group: np.ndarray) -> np.ndarray:
    """32-bit sequence numbers made monotone int64 within each group (rows sorted by group, then
    time): each step is the signed 32-bit difference from the previous row of the same group."""
    seq = seq.astype(np.int64)
    if not len(seq):  # a capture without TCP (a run of UDP flows only)
        return seq
    step = np.empty_like(seq)
    step[0] = 0
    step[1:] = seq_offset(seq[1:], seq[:-1])
    first = np.ones(len(seq), dtype=bool)
    first[1:] = group[1:] != group[:-1]
    step[first] = 0
    csum = np.cumsum(step)
    base = np.maximum.accumulate(np.where(first, np.arange(len(seq)), 0))
    return seq[base] + csum - csum[base]


TCP_SYN = 0x02


def delivered_bytes(labelled: pd.DataFrame) -> pd.DataFrame:
    """Per data frame of labelled frames: `new_bytes`, the payload bytes of the frame that no
    earlier frame of its stream carried (each byte of the stream's sequence space counts once, at
    the time it first crossed the wire: the union of the [seq, seq + payload) ranges, so a
    retransmission counts 0, a segment lost before the capture point counts when it is sent
    again, and overlapping segments count their new part only); `retransmit` (the frame starts
    below the highest byte seen before in its stream). Pass the whole capture, not a window of
    it: a byte seen before the window is not new inside it. Sequence numbers are unwrapped per
    stream (32-bit wraparound); a SYN's payload starts at seq + 1. Returns the data frames with
    these two columns, time-ordered."""
    data = data_frames(labelled)
    if len(data) == 0:
        return data.assign(new_bytes=np.zeros(0, np.int64), retransmit=np.zeros(0, bool))
    data = data.assign(_code=data["stream"].cat.codes.to_numpy()).sort_values(["_code", "t_ns"], kind="stable")
    code = data["_code"].to_numpy().astype(np.int64)
    start = unwrap_seq(data["seq"].to_numpy(), code)
    if "flags" in data.columns:
        start = start + ((data["flags"].to_numpy().astype(np.int64) & TCP_SYN) != 0)
    end = start + data["payload_len"].to_numpy().astype(np.int64)
    prev_max, _ = previous_max_end(code, start, end)
    retrans = start < prev_max
    new = first_coverage(code, start, end, prev_max)
    out = data.assign(new_bytes=new, retransmit=retrans).drop(columns="_code")
    return out.sort_values("t_ns", kind="stable")


def previous_max_end(code: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows sorted by group, then time: the highest end of the earlier rows of the same group (the
    row's own start for a group's first row), and which rows are first of their group."""
    first = np.ones(len(code), dtype=bool)
    first[1:] = code[1:] != code[:-1]
    group_id = np.cumsum(first) - 1
    # Offset each group so one global running maximum stays within its group.
    low = int(min(start.min(), end.min()))
    span = int(max(start.max(), end.max()) - low + 1)
    shifted = end - low + group_id * span
    run_max = np.maximum.accumulate(shifted) - group_id * span + low
    prev_max = np.empty_like(run_max)
    prev_max[1:] = run_max[:-1]
    prev_max[first] = start[first]
    return prev_max, first


def first_coverage(group: np.ndarray, start: np.ndarray, end: np.ndarray,
                   prev_max: np.ndarray | None = None) -> np.ndarray:
    """For intervals [start, end) sorted by group, then time: the length of the part of each that
    no earlier interval of its group covers. A row starting at or above the highest end before it
    (the in-order case) is new as a whole; the groups holding any other row go through an exact
    first-cover computation over their elementary segments (see _first_cover)."""
    group = np.asarray(group, dtype=np.int64)
    start = np.asarray(start, dtype=np.int64)
    end = np.maximum(np.asarray(end, dtype=np.int64), start)
    new = end - start
    if len(start) == 0:
        return new
    if prev_max is None:
        prev_max, _ = previous_max_end(group, start, end)
    behind = start < prev_max
    if not behind.any():
        return new
    # rows are sorted by group: a group needs the exact pass when any of its rows is behind
    change = np.ones(len(group), dtype=bool)
    change[1:] = group[1:] != group[:-1]
    gid = np.cumsum(change) - 1
    rows = np.flatnonzero(np.bincount(gid, weights=behind)[gid] > 0)
    g, s, e = group[rows], start[rows], end[rows]
    # One coordinate line for all these groups, each group on its own stretch of it.
    change = np.ones(len(g), dtype=bool)
    change[1:] = g[1:] != g[:-1]
    gid = np.cumsum(change) - 1
    lo = np.minimum.reduceat(s, np.flatnonzero(change))
    hi = np.maximum.reduceat(e, np.flatnonzero(change))
    offset = np.concatenate([[0], np.cumsum(hi - lo + 1)[:-1]])
    shift = offset[gid] - lo[gid]
    new[rows] = _first_cover(s + shift, e + shift)
    return new


def _first_cover(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Bytes of each interval [start_i, end_i) covered by no interval j < i (non-empty intervals).
    The boundaries cut the line into elementary segments, each wholly inside or outside every
    interval; interval i covers the segments lo_i .. hi_i - 1. Each segment belongs to the
    earliest interval covering it: a range-minimum update of i over [lo_i, hi_i) on a segment tree
    (O(log m) nodes per interval, one vectorized pass per tree level), then each leaf takes the
    minimum along its path from the root."""
    k = len(start)
    bounds = np.sort(np.concatenate([start, end]))
    bounds = bounds[np.concatenate([[True], bounds[1:] != bounds[:-1]])]
    lo = np.searchsorted(bounds, start)
    hi = np.searchsorted(bounds, end)
    m = len(bounds) - 1
    size = 1
    while size < m:
        size *= 2
    tree = np.full(2 * size, k, dtype=np.int64)
    rank = np.arange(k, dtype=np.int64)
    left, right = lo + size, hi + size
    live = np.flatnonzero(left < right)
    while len(live):
        li, ri, rk = left[live], right[live], rank[live]
        odd = (li & 1) == 1
        np.minimum.at(tree, li[odd], rk[odd])
        li = li + odd
        odd = (ri & 1) == 1
        ri = ri - odd
        np.minimum.at(tree, ri[odd], rk[odd])
        left[live], right[live] = li >> 1, ri >> 1
        live = live[left[live] < right[live]]
    level = 1
    while level < size:  # push each node's minimum down to its children
        parents = tree[level:2 * level]
        children = tree[2 * level:4 * level].reshape(level, 2)
        np.minimum(children, parents[:, None], out=children)
        level *= 2
    owner = tree[size:size + m]
    length = np.diff(bounds)
    covered = owner < k
    return np.bincount(owner[covered], weights=length[covered], minlength=k).astype(np.int64)
