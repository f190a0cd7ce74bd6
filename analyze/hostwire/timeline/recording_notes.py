"""What a recording could not see, in one sentence each, for `hostwire gaps` (docs/timeline.md):
the io_uring instances the ptrace and preload tracers saw made and could not read, and the send
calls on descriptors no traced call made (received over a unix socket under tracefs, which cannot
read the control message; opened before the recording or by a call not traced) that nothing
named, whose bytes therefore join no stream."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from hostwire.timeline.fd_lifetimes import NOT_INET, epoch_index

if TYPE_CHECKING:
    from hostwire.run_directory import Run


def io_uring_note(run: Run) -> list[str]:
    """The manifest's io_uring_unseen line (hostwire record, ptrace and preload), if any."""
    line = run.manifest.get("io_uring_unseen")
    return [str(line)] if line else []


def unmade_counts(epochs: pd.DataFrame) -> tuple[int, int]:
    """Of the epochs no traced call made (made_by ""): how many, and how many something named
    (a socket sample, a description: a kind or a stream)."""
    if len(epochs) == 0:
        return 0, 0
    unmade = epochs["made_by"].astype(str).to_numpy() == ""
    named = (epochs["stream"].astype(str).to_numpy() != "") | (epochs["kind"].astype(str).to_numpy() != "")
    return int(unmade.sum()), int((unmade & named).sum())


def unmade_sends_note(calls: pd.DataFrame, epochs: pd.DataFrame) -> list[str]:
    """One sentence when send calls with bytes on descriptors above 2 fell in epochs no traced
    call made and nothing named, and so joined no stream: how many calls, bytes and descriptors,
    and how many such epochs the samples did name."""
    if len(calls) == 0 or len(epochs) == 0 or "is_send" not in calls.columns:
        return []
    # the standard streams are left out: a program's output to its terminal or log would be said
    # in every run (one that is a socket, inetd's, is named by the samples like any other)
    sends = calls[calls["is_send"].to_numpy(bool) & (calls["bytes"].to_numpy() > 0)
                  & (calls["stream"].astype(str).to_numpy() == "") & (calls["fd"].to_numpy() > 2)]
    if len(sends) == 0:
        return []
    at = epoch_index(sends["pid"].to_numpy(), sends["fd"].to_numpy(), sends["t_enter_ns"].to_numpy(), epochs)
    hit = at >= 0
    rows = epochs.iloc[at[hit]]
    blind = ((rows["made_by"].astype(str).to_numpy() == "") & (rows["stream"].astype(str).to_numpy() == "")
             & ~np.isin(rows["kind"].astype(str).to_numpy(), NOT_INET))
    if not blind.any():
        return []
    picked = sends[hit][blind]
    n_epochs = len(np.unique(at[hit][blind]))
    total, named = unmade_counts(epochs)
    return [f"{len(picked)} send calls ({int(picked['bytes'].sum())} bytes) on {n_epochs} descriptors no traced call "
            f"made and no socket sample named (received over a unix socket, which the tracefs backend cannot read, "
            f"opened before the recording, or files) join no stream; the samples named {named} of the {total} "
            f"descriptors no traced call made"]
