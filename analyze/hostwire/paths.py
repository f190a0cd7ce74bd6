"""Where hostwire's built tools live."""

from __future__ import annotations

import os
from pathlib import Path

from hostwire.errors import HostwireError, InputError

REPO_ROOT = Path(__file__).resolve().parents[2]


def build_dir() -> Path:
    """The C build directory: $HOSTWIRE_BUILD, else build/ at the top of the source tree."""
    return Path(os.environ.get("HOSTWIRE_BUILD", REPO_ROOT / "build"))


def tool(name: str) -> Path:
    """Path of a built hostwire program (hw-bench, hw-wirecap, ...); raises if it is not built."""
    path = build_dir() / "bin" / name
    if not os.access(path, os.X_OK):
        raise HostwireError(f"{name} is not built: {path} is missing (run 'make build')")
    return path



def require_utf8_name(path: Path) -> None:
    """Raises InputError for a path whose name is not UTF-8 (b'run-\\xff'): a run's name goes into
    Parquet tables, JSON and reports, which hold only text."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(path).decode("utf-8", "backslashreplace")
        raise InputError(f"{shown}: the name is not UTF-8; rename the directory to read it") from None
