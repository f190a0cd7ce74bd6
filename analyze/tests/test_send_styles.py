"""Every way a program sends, read by the streams' tables (hostwire.read.send_styles): which
records are sends, their bytes (sendmmsg's from req_bytes, io_uring's completions), the
operations on a registered file joined to their process's one stream, and the backlog taking
each send's bytes at its return (an io_uring operation's completion). Hand-built records whose
answer is known."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hostwire.read.send_styles import SEND_CALLS, fixed_file_streams, sent_bytes
from hostwire.timeline import stream_tables

STREAM = "198.18.0.1:40000>198.18.0.2:5201"
OTHER = "198.18.0.1:40002>198.18.0.2:5201"


def records(rows: list[tuple]) -> pd.DataFrame:
    """rows: (t_enter_ns, t_exit_ns, pid, call, fd, req_bytes, result)."""
    df = pd.DataFrame(rows, columns=["t_enter_ns", "t_exit_ns", "pid", "call", "fd", "req_bytes", "result"])
    return df.assign(tid=df["pid"], fd_kind="unknown", fd_desc="", unfinished=False)


def streams(owned: dict[str, tuple[int, int]]) -> pd.DataFrame:
    rows = [{"stream": s, "sender_pid": pid, "sender_fd": fd} for s, (pid, fd) in owned.items()]
    return pd.DataFrame(rows, columns=["stream", "sender_pid", "sender_fd"])


def test_which_records_are_sends_and_their_bytes() -> None:
    calls = records([
        (0, 1, 7, "write", 3, 100, 100),
        (2, 3, 7, "sendmmsg", 4, 8 * 1400, 8),      # eight messages: the bytes are req_bytes
        (4, 5, 7, "sendmmsg", 4, 1400, -11),        # EAGAIN: nothing sent
        (6, 7, 7, "pwritev2", 3, 300, 300),
        (8, 9, 7, "vmsplice", 5, 500, 500),         # into a pipe: no send
        (10, 11, 7, "tee", 6, -1, 500),
        (12, 13, 7, "splice", 3, 500, 500),
        (14, 15, 7, "uring_send_zc", 3, -1, 4096),
        (16, 17, 7, "uring_writev", 3, -1, -32),    # EPIPE
        (18, 19, 7, "write", 3, 10, -4),
    ])
    assert np.array_equal(sent_bytes(calls), [100, 11200, 0, 300, 500, 500, 500, 4096, 0, 0])
    sends = calls["call"].isin(SEND_CALLS).to_numpy()
    assert list(calls["call"][~sends]) == ["vmsplice", "tee"]
    table = stream_tables.calls(calls, {}, streams({STREAM: (7, 3)}))
    on_stream = table[table["is_send"] & (table["stream"] == STREAM)]
    assert int(on_stream["bytes"].sum()) == 100 + 300 + 500 + 4096


def test_registered_file_joins_the_process_one_stream_only() -> None:
    calls = records([
        (0, 5, 7, "uring_send", -1, -1, 1000),   # pid 7 sends on one stream
        (0, 5, 8, "uring_send", -1, -1, 2000),   # pid 8 on two: which is not known
        (0, 5, 9, "uring_send", -1, -1, 3000),   # pid 9 on none
        (6, 7, 8, "write", -1, 10, -9),          # a plain call on fd -1 is no registered file
    ])
    owned = streams({STREAM: (7, 3), OTHER: (8, 4), "198.18.0.1:40004>198.18.0.2:5201": (8, 5)})
    joined = fixed_file_streams(calls, np.full(len(calls), "", dtype=object), owned)
    assert list(joined) == [STREAM, "", "", ""]
    assert list(stream_tables.calls(calls, {}, owned)["stream"]) == [STREAM, "", "", ""]


def test_an_io_uring_operation_enters_the_backlog_at_its_completion() -> None:
    """Submitted at 100, completed at 900 (the socket had no room until then): its bytes are
    written at 900, and a frame at 1000 takes them off."""
    frames = pd.DataFrame({"t_ns": [50, 1000], "stream": STREAM, "seq_start": [0, 1000], "seq_end": [1000, 3000],
                           "payload_len": [1000, 2000], "retransmit": False})
    writes = pd.DataFrame({"stream": STREAM, "t_enter_ns": [0, 100], "t_exit_ns": [40, 900], "bytes": [1000, 2000]})
    level = stream_tables.backlog(frames, writes)
    assert list(zip(level["t_ns"], level["written_bytes"], level["backlog_bytes"])) == [
        (40, 1000, 1000), (50, 1000, 0), (900, 3000, 2000), (1000, 3000, 0)]
    seg = stream_tables.segments(frames, writes)
    assert list(seg["write_id"]) == [0, 1]
