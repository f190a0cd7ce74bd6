"""The ways a program sends, as syscalls.tsv records them (docs/timeline.md, "Every way a program
sends"): which records put bytes into a socket, and how many bytes each put there.

- The system calls that write to the fd they name: write, writev, pwrite64, pwritev, pwritev2,
  sendto (send), sendmsg (also with MSG_ZEROCOPY: the call's result is what the socket took; the
  completion notifications read from the error queue carry no bytes and are recvmsg records),
  sendmmsg, sendfile and splice (their record names the fd written to). The bytes are the result,
  except sendmmsg's, whose result counts messages: its bytes are req_bytes (the messages' bytes,
  summed by the tracer; tracefs: the bytes each message put into the socket).
- vmsplice and tee fill a pipe, never a socket: their bytes reach a socket through a later splice,
  which is the send.
- io_uring's operations (hw-schedtrace's kernel trace, "uring_<op>"): send, sendmsg, send_zc,
  sendmsg_zc, write, writev, write_fixed, splice; entered at their submission, returned at their
  completion, the bytes the completion's result. An operation on a registered file names no fd
  (fd -1): see fixed_file_streams.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

SYSCALL_SENDS = ("write", "writev", "pwrite64", "pwritev", "pwritev2", "sendto", "sendmsg", "sendmmsg", "sendfile",
                 "splice")
URING_SENDS = ("uring_send", "uring_sendmsg", "uring_send_zc", "uring_sendmsg_zc", "uring_write", "uring_writev",
               "uring_write_fixed", "uring_splice")
SEND_CALLS = SYSCALL_SENDS + URING_SENDS
COUNTS_MESSAGES = ("sendmmsg",)  # the result is a number of messages, the bytes are req_bytes


def sent_bytes(calls: pd.DataFrame) -> np.ndarray:
    """The bytes each record put into its fd (int64, 0 for a failed or unfinished call or one
    that sends nothing): the result when positive; for sendmmsg, req_bytes when it sent at least
    one message."""
    result = pd.to_numeric(calls["result"], errors="coerce").fillna(0).clip(lower=0).astype("int64").to_numpy()
    messages = calls["call"].isin(COUNTS_MESSAGES).to_numpy()
    if messages.any() and "req_bytes" in calls.columns:
        req = calls["req_bytes"].to_numpy().astype(np.int64)
        result = np.where(messages, np.where(result > 0, np.maximum(req, 0), 0), result)
    return result


def fixed_file_streams(calls: pd.DataFrame, stream: np.ndarray, streams: pd.DataFrame | None) -> np.ndarray:
    """stream (one name per row of calls, "" unjoined) with the io_uring operations on a registered
    file (fd -1: the kernel traces no fd for them) joined to their process's stream when the process
    sent on exactly one stream (streams: df_streams()); with several, nothing tells which, and they
    stay unjoined."""
    fixed = calls["call"].astype(str).str.startswith("uring_").to_numpy() & (calls["fd"].to_numpy() < 0)
    if not fixed.any() or streams is None or len(streams) == 0:
        return stream
    owned = streams[streams["sender_pid"] > 0].groupby("sender_pid")["stream"].agg(list)
    only = {int(pid): names[0] for pid, names in owned.items() if len(names) == 1}
    out = stream.copy()
    pids = calls["pid"].to_numpy()
    for i in np.flatnonzero(fixed):
        out[i] = only.get(int(pids[i]), out[i])
    return out
