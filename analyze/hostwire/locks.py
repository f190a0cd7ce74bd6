"""One writer at a time: an exclusive `fcntl.flock` on a lock file in the directory written to.

`hostwire run` holds the lock of its campaign directory for as long as it records, and so does
`hostwire doctor --cleanup` while it marks the campaign's runs; the runner also holds the lock
of the run directory it records into, and `hostwire analyze` holds a run directory's lock while
it computes that run. The lock file (`.hostwire.lock`) holds the holder's pid and what it does,
so that a second writer is told, in one line, who holds it. The kernel drops a flock when its
holder's descriptor closes, which includes the holder's death by SIGKILL: a lock is never stale.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hostwire.errors import HostwireError

LOCK_NAME = ".hostwire.lock"


class LockedError(HostwireError):
    """The directory is locked by another hostwire process (exit 1); `holder` is its pid, when
    known, and `what` what it said it does."""

    def __init__(self, message: str, holder: int | None, what: str) -> None:
        super().__init__(message)
        self.holder = holder
        self.what = what


def holder(directory: Path) -> tuple[int | None, str]:
    """(pid, what) written in a directory's lock file by its last holder ((None, "") if unknown)."""
    try:
        text = (directory / LOCK_NAME).read_text(encoding="utf-8", errors="replace").split(maxsplit=1)
    except OSError:
        return None, ""
    pid = int(text[0]) if text and text[0].isdigit() else None
    return pid, (text[1].strip() if len(text) > 1 else "")


@contextmanager
def locked(directory: Path, what: str, *, wait_s: float = 0.0) -> Iterator[None]:
    """Holds the exclusive lock of `directory` (which must exist) for the block. When another
    process holds it, waits up to `wait_s` seconds and then raises LockedError naming the
    holder's pid and what it does."""
    from hostwire.safewrite import open_dir

    path = directory / LOCK_NAME
    with open_dir(directory) as dir_fd:  # a symlinked folder is refused, not followed
        try:
            fd = os.open(LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
        except OSError as err:
            raise HostwireError(f"cannot lock {directory}: {path}: {err.strerror or err}") from None
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as err:
                if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise HostwireError(f"cannot lock {directory}: {err.strerror or err}") from None
                if time.monotonic() >= deadline:
                    pid, doing = holder(directory)
                    who = f"pid {pid}" if pid is not None else "another process"
                    raise LockedError(f"{directory} is locked by {who}" + (f" ({doing})" if doing else "")
                                      + f"; wait for it to end (lock file {path})", pid, doing) from None
                time.sleep(0.05)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {what}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # drops the lock; the file stays (removing it would race with the next holder)
