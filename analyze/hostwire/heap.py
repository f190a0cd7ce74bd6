"""Freed memory handed back to the kernel between the phases of a long analysis.

Memory a table frees stays with the allocator that gave it: Arrow's pool (mimalloc, which pandas'
string columns and the trace readers allocate from) keeps its pages for reuse, and glibc keeps
the top of its heap and the holes below it. Between phases that allocate differently sized tables
(the capture's frames, then one kernel slab after another) the process then holds the sum of every
phase's peak instead of the largest one: on a 60 s run with 20 senders about 400 MiB of anonymous
memory that no object used (docs/performance.md)."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable


@functools.cache
def _libc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim") if name else None
    except (OSError, AttributeError):  # not glibc: nothing to trim
        return None


def give_back() -> None:
    """Returns the freed pages of Arrow's memory pool and of the C heap to the kernel."""
    import pyarrow

    pyarrow.default_memory_pool().release_unused()
    trim = _libc_trim()
    if trim is not None:
        trim(0)
