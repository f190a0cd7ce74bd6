"""The shaped device's own queue (docs/timeline.md, "Gaps": qdisc): when each frame that left a
device was handed to the device's queueing discipline, from the kernel trace's `net_dev_queue`
events (a buffer handed to the device's qdisc: its stamp, `len` with the link header, the device
`name`) and the capture on that device (libpcap taps each frame as the qdisc hands it to the
driver, after the dequeue).

A FIFO qdisc (tbf over its default bfifo, pfifo, bfifo, pfifo_fast within a band)
hands its buffers on in the order they came in, so per device the k-th enqueued buffer is the
k-th transmitted one, with two exceptions this pairing handles:

- GSO: a buffer larger than tbf's max size is segmented on enqueue (tbf_segment), and comes out
  as consecutive frames of one flow whose payloads add up to the buffer's payload: its `len`
  less the link header less the first segment's IP and TCP headers. (A buffer the qdisc does not
  segment is captured as one frame of the buffer's whole length.)
- Two buffers handed to the device by two CPUs at nearly the same time: `net_dev_queue` fires
  before the qdisc's lock is taken, so the CPU that traced second can enqueue first (redis
  answering on one CPU while the other CPU's softirq acknowledges: 0.1 us apart, transmitted in
  the other order). When the next buffer does not fit the next frame but the one after it does,
  both stamped within SWAP_SLACK_NS, and the first then fits the frames after the second's, the
  two are paired swapped.
- Buffers never transmitted (a qdisc drop, skb:kfree_skb; or still queued when the capture
  stopped) and frames whose enqueue the trace lacks (a ring buffer's lost events): when the next
  buffer does not fit the next frame, the pairing re-synchronises on the smallest skip of either
  side (at most RESYNC_WINDOW in all) after which they fit again, and counts what it skipped.

A frame is never paired with a buffer enqueued more than CLOCK_SLACK_NS after it (the capture's
stamps are put on the trace's clock from two clock pairs, a few microseconds apart at most).

The pairing is a sequential walk over two ordered lists (each step depends on the skips before
it), O(buffers + frames). Every count goes into the gap table's sources, never silently.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hostwire.spill import Columns

QUEUE_COLUMNS = ["t_ns", "len", "device"]
TRACE_COLUMNS = ("len", "name")  # what the kernel trace's reader must keep of a net_dev_queue event
# qdisc kinds that hand their buffers on in the order they came (a tbf's child is its bfifo); not
# noqueue: a device without a queue hands each buffer straight to its driver, and the time from
# dev_queue_xmit to the driver is the stack's own send path, not a queue's
FIFO_KINDS = frozenset({"tbf", "pfifo", "bfifo", "pfifo_fast", "pfifo_head_drop"})
LINK_HEADERS = (14, 0)  # Ethernet (veth, lo, NICs), then none (tun, wireguard): the one that pairs more wins
CLOCK_SLACK_NS = 20_000
# the most two swapped buffers' net_dev_queue stamps lie apart (0.1 us seen; a CPU held between the
# event and the queue's lock by an interrupt), the clocks' bound again
SWAP_SLACK_NS = CLOCK_SLACK_NS
RESYNC_WINDOW = 32
PROBE_BUFFERS = 400  # the buffers the link header is chosen on


def empty_enqueues() -> pd.DataFrame:
    return pd.DataFrame({"t_ns": pd.Series(dtype=np.int64), "len": pd.Series(dtype=np.int64),
                         "device": pd.Series(dtype=object)})


def enqueues(events: pd.DataFrame) -> pd.DataFrame:
    """The net_dev_queue events of a piece of the kernel trace (QUEUE_COLUMNS), in its order: the
    rows alone are kept, so that a trace read in slabs gives the whole trace's table."""
    if "len" not in events.columns or "name" not in events.columns:
        return empty_enqueues()
    mine = np.asarray(events["event"].isin(["net_dev_queue"]), dtype=bool)
    if not mine.any():
        return empty_enqueues()
    part = events[mine]
    return pd.DataFrame({"t_ns": part["t_ns"].to_numpy().astype(np.int64),
                         "len": pd.to_numeric(part["len"], errors="coerce").fillna(-1).to_numpy().astype(np.int64),
                         "device": part["name"].astype(str).to_numpy(dtype=object)})


class SpilledEnqueues:
    """The enqueues of a trace read in slabs, written to scratch files slab by slab (as
    qdisc_waits.SpilledProbes), the device names as codes of the few there are."""

    def __init__(self) -> None:
        self.columns = Columns({"t_ns": np.int64, "len": np.int64, "device": np.int64})
        self.devices: dict[str, int] = {}

    def add(self, found: pd.DataFrame) -> None:
        if len(found) == 0:
            return
        codes = np.asarray([self.devices.setdefault(str(d), len(self.devices)) for d in found["device"]], np.int64)
        self.columns.append(0, t_ns=found["t_ns"].to_numpy(), len=found["len"].to_numpy(), device=codes)

    def table(self) -> pd.DataFrame:
        if not self.columns.rows:
            return empty_enqueues()
        joined = self.columns.joined()
        names = np.asarray(list(self.devices), dtype=object)
        return pd.DataFrame({"t_ns": joined["t_ns"], "len": joined["len"], "device": names[joined["device"]]},
                            copy=False)


def joined_enqueues(pieces: Iterable[pd.DataFrame]) -> pd.DataFrame:
    parts = [p for p in pieces if len(p)]
    return pd.concat(parts, ignore_index=True) if parts else empty_enqueues()


@dataclass
class Pairing:
    """What the pairing of one device found: per frame the stamp of its buffer's enqueue and that
    buffer's place among the device's enqueues (-1 both: unpaired), and the counts."""

    enqueued_ns: np.ndarray
    buffer_of: np.ndarray
    link_header: int = 14
    buffers: int = 0
    paired_buffers: int = 0
    segmented_buffers: int = 0  # buffers that left as two frames or more (GSO)
    unsent_buffers: int = 0      # never transmitted: dropped, or queued when the capture stopped
    unpaired_frames: int = 0     # frames without a buffer: its enqueue not in the trace
    swapped_buffers: int = 0     # paired in the other order than the trace's (the module doc)

    def summary(self) -> dict[str, int]:
        return {"buffers": self.buffers, "frames": len(self.enqueued_ns), "paired_buffers": self.paired_buffers,
                "segmented_buffers": self.segmented_buffers, "unsent_buffers": self.unsent_buffers,
                "unpaired_frames": self.unpaired_frames, "swapped_buffers": self.swapped_buffers,
                "link_header": self.link_header}


def pair(queue_t: np.ndarray, queue_len: np.ndarray, frame_t: np.ndarray, ip_len: np.ndarray,
         payload: np.ndarray, flow: np.ndarray) -> Pairing:
    """Pairs one device's enqueued buffers (stamps and lengths, in trace order) with the frames it
    transmitted (stamps, IP lengths, payloads and a flow code each, in capture order): the module
    doc's rule, with the link header that makes more of the first PROBE_BUFFERS buffers' lengths
    the IP length of some frame."""
    lengths = np.unique(ip_len)
    hits = [int(np.isin(queue_len[:PROBE_BUFFERS] - h, lengths).sum()) for h in LINK_HEADERS]
    header = LINK_HEADERS[int(np.argmax(hits))]  # the first of equals: Ethernet
    out = _walk(queue_t, queue_len - header, frame_t, ip_len, payload, flow)
    out.link_header = header
    return out


def _walk(queue_t: np.ndarray, need: np.ndarray, frame_t: np.ndarray, ip_len: np.ndarray, payload: np.ndarray,
          flow: np.ndarray) -> Pairing:
    qt, nd = queue_t.tolist(), need.tolist()
    ft, il, pl, fl = frame_t.tolist(), ip_len.tolist(), payload.tolist(), flow.tolist()
    n, m = len(qt), len(ft)
    got = np.full(m, -1, np.int64)
    which = np.full(m, -1, np.int64)
    out = Pairing(enqueued_ns=got, buffer_of=which, buffers=n)

    def fits(i: int, j: int) -> int:
        """How many frames from j make buffer i (0: they do not)."""
        if ft[j] + CLOCK_SLACK_NS < qt[i]:
            return 0
        total = il[j]
        if total == nd[i]:
            return 1
        if total > nd[i] or pl[j] <= 0:
            return 0
        k = 1
        while total < nd[i] and j + k < m and fl[j + k] == fl[j] and pl[j + k] > 0:
            total += pl[j + k]
            k += 1
        return k if total == nd[i] else 0

    def take(i: int, j: int, k: int) -> None:
        got[j:j + k] = qt[i]
        which[j:j + k] = i
        out.paired_buffers += 1
        out.segmented_buffers += k > 1

    def swapped(i: int, j: int) -> tuple[int, int] | None:
        """The frame counts of buffers i + 1 and i when the two entered the qdisc in the other
        order than the trace's (the module doc), None when they did not."""
        if i + 1 >= n or qt[i + 1] - qt[i] > SWAP_SLACK_NS:
            return None
        second = fits(i + 1, j)
        first = fits(i, j + second) if second and j + second < m else 0
        return (second, first) if first else None

    i = j = 0
    while i < n and j < m:
        k = fits(i, j)
        if k == 0 and (swap := swapped(i, j)) is not None:
            take(i + 1, j, swap[0])
            take(i, j + swap[0], swap[1])
            out.swapped_buffers += 2
            i, j = i + 2, j + swap[0] + swap[1]
            continue
        if k == 0:
            skip = _resync(fits, i, j, n, m)
            if skip is None:  # nothing fits near: this buffer went nowhere the capture saw
                out.unsent_buffers += 1
                i += 1
                continue
            di, dj = skip
            out.unsent_buffers += di
            out.unpaired_frames += dj
            i, j = i + di, j + dj
            k = fits(i, j)
        take(i, j, k)
        i, j = i + 1, j + k
    out.unsent_buffers += n - i
    out.unpaired_frames += m - j
    return out


def _resync(fits, i: int, j: int, n: int, m: int) -> tuple[int, int] | None:  # type: ignore[no-untyped-def]
    """The smallest skip (buffers, frames), by their sum, after which buffer and frame fit again."""
    for total in range(1, RESYNC_WINDOW + 1):
        for di in range(total + 1):
            dj = total - di
            if i + di < n and j + dj < m and fits(i + di, j + dj):
                return di, dj
    return None


def outside(found: Pairing, frame_t: np.ndarray, span: tuple[int, int]) -> int:
    """The unpaired frames the capture saw before the kernel trace began or after it ended (the
    collectors stop one after the other): they have no enqueue to pair with."""
    return int(((found.buffer_of < 0) & ((frame_t < span[0]) | (frame_t > span[1]))).sum())


def fifo_devices(link: dict) -> list[str]:  # type: ignore[type-arg]
    """The captured devices other than loopback whose queueing disciplines are all FIFO (the
    manifest's link facts)."""
    looped = {str(i.get("name")) for i in link.get("interfaces", []) if i.get("loopback")}
    out = []
    for name, info in (link.get("qdiscs") or {}).items():
        kinds = [str(k) for k in (info or {}).get("kinds", [])]
        if name not in looped and kinds and set(kinds) <= FIFO_KINDS:
            out.append(str(name))
    return sorted(out)


def frame_streams(frames: pd.DataFrame) -> np.ndarray:
    """Each frame's stream name as the timeline spells it (src:sport>dst:dport, IPv6 in brackets;
    a UDP flow's name is its ends alone, as hostwire.timeline.program_streams names it)."""
    def host(column: pd.Series) -> pd.Series:
        text = column.astype(str)
        return text.where(~text.str.contains(":", regex=False), "[" + text + "]")

    return (host(frames["src"]) + ":" + frames["sport"].astype(str) + ">" + host(frames["dst"]) + ":"
            + frames["dport"].astype(str)).to_numpy(dtype=object)


def frame_flows(frames: pd.DataFrame) -> np.ndarray:
    """Each frame's flow as a code: its stream and protocol (a TCP and a UDP flow between the same
    ends are two)."""
    if not len(frames):
        return np.zeros(0, np.int64)
    keys = pd.MultiIndex.from_arrays([frame_streams(frames), frames["proto"].to_numpy()])
    return np.asarray(pd.factorize(keys)[0], np.int64)


def queue_holds(queued: pd.DataFrame, device: str, frames: pd.DataFrame) -> tuple[pd.DataFrame, Pairing]:
    """The qdisc intervals (stream, t_start_ns, t_end_ns) of the device's data frames: [enqueue,
    frame) for each frame with payload paired with its buffer; and the pairing's counts.
    frames: the frames the device transmitted (t_ns, ip_len, payload_len, proto, src, sport,
    dst, dport), in time order."""
    mine = queued[queued["device"].astype(str).to_numpy() == device]
    flow = frame_flows(frames)
    result = pair(mine["t_ns"].to_numpy(np.int64), mine["len"].to_numpy(np.int64),
                  frames["t_ns"].to_numpy(np.int64), frames["ip_len"].to_numpy(np.int64),
                  frames["payload_len"].to_numpy(np.int64), np.asarray(flow, np.int64))
    t = frames["t_ns"].to_numpy(np.int64)
    held = (result.enqueued_ns >= 0) & (frames["payload_len"].to_numpy(np.int64) > 0) & (result.enqueued_ns < t)
    names = frame_streams(frames[held]) if held.any() else np.zeros(0, object)
    return pd.DataFrame({"stream": names, "t_start_ns": result.enqueued_ns[held], "t_end_ns": t[held]}), result
