"""The ATM view of a stream (DESIGN.md section 8): a frame of IP length L becomes
ceil((L + encap) / 48) cells (encap 16: LLC/SNAP 8 bytes + AAL5 trailer 8 bytes), sent back to back
at the line cell rate R = link_rate / 424 bit: c_j = max(a_j, c_(j-1) + 1/R), a_j the frame's stamp.
The cell time 1/R is an integer number of ns when 424e9 / link_rate is one (10, 100, 1000 Mbit/s),
float64 otherwise."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hostwire.errors import InputError, UsageError

CELL_BITS = 424
CELL_PAYLOAD = 48
DEFAULT_ENCAP = 16
DEFAULT_MSS = 1448       # Linux TCP payload per segment with timestamps, MTU 1500
DEFAULT_HEADERS = 52     # IPv4 20 + TCP 20 + timestamp option 12


def cell_time_ns(link_rate_bit_s: float) -> int | float:
    """1/R in ns: an int when exact, else a float."""
    if link_rate_bit_s <= 0:
        raise UsageError(f"link rate {link_rate_bit_s} bit/s: expected > 0")
    exact = CELL_BITS * 10**9 / link_rate_bit_s
    if float(link_rate_bit_s).is_integer() and (CELL_BITS * 10**9) % int(link_rate_bit_s) == 0:
        return (CELL_BITS * 10**9) // int(link_rate_bit_s)
    return exact


def cells_per_frame(ip_len: np.ndarray, encap: int = DEFAULT_ENCAP) -> np.ndarray:
    if encap < 0:
        raise UsageError(f"--encap {encap}: expected bytes >= 0")
    ip_len = np.asarray(ip_len, dtype=np.int64)
    if len(ip_len) and ip_len.min() <= 0:
        raise InputError(f"an IP length of {int(ip_len.min())} bytes: expected > 0")
    return -(-(ip_len + encap) // CELL_PAYLOAD)


def cells_per_write(nbytes: np.ndarray, mss: int = DEFAULT_MSS, headers: int = DEFAULT_HEADERS,
                    encap: int = DEFAULT_ENCAP) -> np.ndarray:
    """Cells for writes of nbytes each, cut into TCP segments of at most mss payload bytes, each
    segment an IP packet of payload + headers bytes (the wire segmentation TCP would do)."""
    if mss < 1:
        raise UsageError(f"--mss {mss}: expected >= 1")
    nbytes = np.asarray(nbytes, dtype=np.int64)
    full, rest = np.divmod(np.clip(nbytes, 0, None), mss)
    per_full = -(-(mss + headers + encap) // CELL_PAYLOAD)
    per_rest = -(-(rest + headers + encap) // CELL_PAYLOAD)
    return full * per_full + np.where(rest > 0, per_rest, 0)


@dataclass
class CellStream:
    """Cell stamps c_j (int64 ns when the cell time is integral, else float64) and the cell time."""

    c: np.ndarray
    cell_time: int | float
    _periods: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False, compare=False)

    @property
    def count(self) -> int:
        return len(self.c)

    def busy_periods(self) -> tuple[np.ndarray, np.ndarray]:
        """Index of the first and of the last cell of each run of back-to-back cells (cells 1/R
        apart). Cached; a float stream splits a run wherever the gap exceeds 1/R by 1e-6 ns, which
        only adds boundaries (harmless for the contract)."""
        if self._periods is None:
            gap = np.diff(self.c)
            brk = gap > self.cell_time if self.c.dtype.kind in "iu" else gap > float(self.cell_time) + 1e-6
            cut = np.flatnonzero(brk)
            self._periods = (np.concatenate([[0], cut + 1]), np.concatenate([cut, [len(self.c) - 1]]))
        return self._periods

    def mean_rate_per_ns(self) -> float:
        """Cells over (c_last - c_first + 1/R)."""
        span = float(self.c[-1] - self.c[0]) + float(self.cell_time)
        return self.count / span


def cell_stamps(a_ns: np.ndarray, ncells: np.ndarray, cell_time: int | float) -> CellStream:
    """c_j = max(a_j, c_(j-1) + D) for the cells of time-ordered units (frames or writes) stamped
    a_ns, unit i giving ncells[i] cells. With u_j = c_j - j D the recursion is a running maximum:
    u_j = max(a_j - j D, u_(j-1)), so c = j D + maximum.accumulate(a - j D)."""
    a_ns = np.asarray(a_ns, dtype=np.int64)
    ncells = np.asarray(ncells, dtype=np.int64)
    if len(a_ns) and np.any(a_ns[1:] < a_ns[:-1]):
        order = np.argsort(a_ns, kind="stable")
        a_ns, ncells = a_ns[order], ncells[order]
    total = int(ncells.sum())
    if total == 0:
        raise InputError("no cells: the stream carries no bytes in the window")
    base = int(a_ns[0])
    a = np.repeat(a_ns - base, ncells)
    if isinstance(cell_time, (int, np.integer)):
        jd = np.arange(total, dtype=np.int64) * int(cell_time)
        c = np.maximum.accumulate(a - jd) + jd + base
    else:
        jd = np.arange(total, dtype=np.float64) * float(cell_time)
        c = np.maximum.accumulate(a.astype(np.float64) - jd) + jd + float(base)
    return CellStream(c=c, cell_time=cell_time)


def stream_cells_from_frames(a_ns_by_stream: dict[str, tuple[np.ndarray, np.ndarray]], link_rate_bit_s: float,
                             encap: int = DEFAULT_ENCAP) -> dict[str, CellStream]:
    """{stream: (frame stamps, IP lengths)} -> {stream: CellStream}."""
    d = cell_time_ns(link_rate_bit_s)
    return {name: cell_stamps(t, cells_per_frame(ip_len, encap), d)
            for name, (t, ip_len) in a_ns_by_stream.items() if len(t)}


def stream_cells_from_writes(writes_by_stream: dict[str, tuple[np.ndarray, np.ndarray]], link_rate_bit_s: float,
                             mss: int = DEFAULT_MSS, headers: int = DEFAULT_HEADERS,
                             encap: int = DEFAULT_ENCAP) -> dict[str, CellStream]:
    """{stream: (write start stamps, bytes written)} -> {stream: CellStream}."""
    d = cell_time_ns(link_rate_bit_s)
    out = {}
    for name, (t, nbytes) in writes_by_stream.items():
        n = cells_per_write(nbytes, mss, headers, encap)
        if n.sum() > 0:
            out[name] = cell_stamps(t, n, d)
    return out
