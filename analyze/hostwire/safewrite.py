"""Every file hostwire writes goes through here: a fresh temporary file beside the target, made with
O_CREAT|O_EXCL|O_NOFOLLOW under a random name, written, synced and renamed over the target, all
through a descriptor of the target's folder opened with O_NOFOLLOW|O_DIRECTORY. So a symbolic
link planted at the target's or at any predictable temporary name is replaced, never followed, a
symlinked output folder (tables/, plots/, a run folder) is refused with one line, and a reader
sees the old content or the new one, never half of one."""

from __future__ import annotations

import errno
import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from hostwire.errors import HostwireError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _refusal(path: Path, err: OSError) -> HostwireError:
    if err.errno in (errno.ELOOP, errno.ENOTDIR):
        return HostwireError(f"{path}: is a symbolic link or not a directory; refusing to write through it")
    return HostwireError(f"failed to open {path}: {err.strerror or err}")


@contextmanager
def open_dir(path: Path, *, below: Path | None = None, create: bool = False) -> Iterator[int]:
    """A descriptor of the folder path, no component of it followed if it is a symbolic link from
    `below` on (below itself, if given, is opened as named; without it only path's last component
    is checked). create: missing folders from there on are made."""
    path = Path(path)
    if below is not None:
        base, parts = Path(below), Path(path).relative_to(below).parts
    else:  # "." (the folder of a bare file name) has no name of its own to check
        base, parts = path.parent, (path.name,) if path.name else ()
    try:
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as err:
        raise _refusal(base, err) from None
    try:
        walked = base
        for part in parts:
            walked = walked / part
            if create:
                try:
                    os.mkdir(part, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass
                except OSError as err:
                    raise HostwireError(f"failed to create {walked}: {err.strerror or err}") from None
            try:
                sub = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as err:
                raise _refusal(walked, err) from None
            os.close(fd)
            fd = sub
        yield fd
    finally:
        os.close(fd)


def write_with(path: Path, writer: Callable[[BinaryIO], None], *, below: Path | None = None,
               create: bool = False, mode: int = 0o666) -> None:
    """Writes path by writer(file) on a fresh temporary file in its folder, then renames it over
    path. A failure removes the temporary file and raises HostwireError naming path. below and
    create: as open_dir for path's folder."""
    path = Path(path)
    with open_dir(path.parent, below=below, create=create) as dir_fd:
        tmp, fd = _make_temp(path, dir_fd, mode)
        try:
            with os.fdopen(fd, "wb") as handle:
                writer(handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException as err:
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except OSError:
                pass
            if isinstance(err, OSError):
                raise HostwireError(f"failed to write {path}: {err.strerror or err}") from None
            raise


def _make_temp(path: Path, dir_fd: int, mode: int) -> tuple[str, int]:
    for _ in range(100):
        name = f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            return name, os.open(name, _TMP_FLAGS, mode, dir_fd=dir_fd)
        except FileExistsError:
            continue
        except OSError as err:
            raise HostwireError(f"failed to write {path}: {err.strerror or err}") from None
    raise HostwireError(f"failed to write {path}: no free temporary name")


def write_bytes(path: Path, data: bytes, **options: object) -> None:
    write_with(path, lambda handle: handle.write(data), **options)  # type: ignore[arg-type]


def write_text(path: Path, text: str, **options: object) -> None:
    write_bytes(path, text.encode("utf-8"), **options)
