"""Child processes that do not outlive hostwire: a runner killed with SIGKILL has no chance to
stop its collectors and benchmark, so the kernel does it (PR_SET_PDEATHSIG)."""

from __future__ import annotations

import ctypes
import signal

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def die_with_parent() -> None:
    """preexec_fn for subprocess: SIGTERM this child when the process that started it dies (the
    setting survives exec, and the tools stop cleanly on SIGTERM)."""
    _libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
