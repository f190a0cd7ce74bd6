"""Freed memory handed back between the phases of a long analysis (hostwire.heap)."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from hostwire.heap import give_back
from hostwire.procmem import anon_bytes


def test_freed_tables_leave_the_process() -> None:
    """Strings in Arrow's pool and a few hundred mid-sized numpy arrays, freed: the allocators keep
    most of their pages until give_back returns them."""
    def anon_mib() -> float:
        return anon_bytes(os.getpid()) / 2**20

    names = pd.Series(np.char.add("stream-", np.arange(2_000_000).astype(str)).astype(object)).astype("str")
    parts = [np.arange(50_000 + i) for i in range(300)]
    held = anon_mib()
    del names, parts
    kept = anon_mib()
    give_back()
    after = anon_mib()
    assert kept - after > 60, (held, kept, after)
