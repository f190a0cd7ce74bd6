"""Processes that do not outlive hostwire. A hostwire killed with SIGKILL has no chance to stop what
it started, so the kernel does it: every child is given a parent-death signal (PR_SET_PDEATHSIG).
The signal follows the *thread* that forked the child, so children are started from the main
thread (a process pool launches its workers from the thread that submits, here the main one), and
a child whose parent is already gone when it sets the signal exits at once."""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hostwire.errors import Terminated

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def die_with_parent() -> None:
    """preexec_fn for subprocess: SIGTERM this child when the process that started it dies (the
    setting survives exec, and the tools stop cleanly on SIGTERM)."""
    _libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


def die_with_parent_env() -> dict[str, str]:
    """The environment for a tool that sets its parent-death signal itself (hw-pcapcols): started
    without preexec_fn, subprocess spawns it without forking the interpreter (0.75 ms a start
    instead of 5.5 ms with pandas loaded, which a capture read in many pieces pays each time)."""
    return dict(os.environ, HOSTWIRE_PARENT_PID=str(os.getpid()))


def pool_worker_init(parent_pid: int) -> None:
    """initializer of a process pool's workers: the parent's Python signal handlers (inherited by
    fork) are dropped, SIGTERM kills the worker (and, through their own parent-death signal, the
    tools it runs), Ctrl-C is left to the parent, which stops the pool; and the worker dies with
    its parent, even one killed with SIGKILL."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # forked with them blocked (held_signals)
    die_with_parent()
    if os.getppid() != parent_pid:  # the parent died before the signal was set
        os._exit(1)


STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


@contextmanager
def held_signals() -> Iterator[None]:
    """SIGTERM and SIGINT held back for the block (then delivered): a child forked inside starts
    with them blocked, so none strikes its inherited handler before it has set its own
    (pool_worker_init unblocks them), and none interrupts the parent in the middle of a fork."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


@contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """SIGTERM raises Terminated in the main thread while inside, so unwinding runs every teardown
    (stops a pool's workers, removes what was set up), as Ctrl-C does."""
    def raise_terminated(signum: int, frame: Any) -> None:
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
