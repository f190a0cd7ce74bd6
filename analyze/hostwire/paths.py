"""Where hostwire's built tools live, and which source revision this copy of hostwire is.

Three places, in order: $HOSTWIRE_BUILD (tests point it at the sanitized build); the installed
layout that `make install` and the Debian package describe in `installed.json` beside this module
(the C tools in PREFIX/libexec/hostwire/bin, the preload library in .../lib); the checkout's
build/ (`make build`)."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from hostwire.errors import HostwireError, InputError

REPO_ROOT = Path(__file__).resolve().parents[2]
INSTALLED_FILE = Path(__file__).resolve().parent / "installed.json"


@dataclass(frozen=True)
class Installed:
    """What `make install` wrote into installed.json: the prefix it installed into, the folder of
    the C tools, the source revision it was built from."""

    prefix: Path
    libexec: Path
    revision: str


@cache
def installed() -> Installed | None:
    """The installed layout, or None when this package runs from a checkout."""
    try:
        data = json.loads(INSTALLED_FILE.read_text())
        return Installed(Path(data["prefix"]), Path(data["libexec"]), str(data["revision"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise HostwireError(f"{INSTALLED_FILE}: unreadable install description ({err}); "
                            "reinstall hostwire") from None


def build_dir() -> Path:
    """The C build directory: $HOSTWIRE_BUILD, else the installed libexec folder, else build/ at
    the top of the source tree."""
    return build_dir_origin()[0]


def build_dir_origin() -> tuple[Path, str]:
    """The C build directory and how it was chosen ("$HOSTWIRE_BUILD", "installed", "checkout")."""
    override = os.environ.get("HOSTWIRE_BUILD")
    if override:
        return Path(override), "$HOSTWIRE_BUILD"
    layout = installed()
    if layout is not None:
        return layout.libexec, "installed"
    return REPO_ROOT / "build", "checkout"


def tool(name: str) -> Path:
    """Path of a built hostwire program (hw-bench, hw-wirecap, ...); raises if it is not built."""
    return _built("bin", name, os.X_OK)


def library(name: str) -> Path:
    """Path of a built hostwire shared library (libhwpcapcols.so, ...); raises if it is not built."""
    return _built("lib", name, os.R_OK)


def _built(folder: str, name: str, access: int) -> Path:
    path = build_dir() / folder / name
    if not os.access(path, access):
        fix = "reinstall hostwire" if installed() and "HOSTWIRE_BUILD" not in os.environ else "run 'make build'"
        raise HostwireError(f"{name} is not built: {path} is missing ({fix})")
    return path


def runs_root() -> Path:
    """Where commands put their outputs by default: the checkout's runs/, or ./runs for an
    installed hostwire (never inside the install prefix)."""
    return Path("runs") if installed() is not None else REPO_ROOT / "runs"


@cache
def source_revision() -> str | None:
    """The git revision this hostwire was built from ("<sha>" or "<sha>-dirty"): recorded at
    install time, else asked of the checkout's git; None when neither knows."""
    layout = installed()
    if layout is not None:
        return None if layout.revision == "unknown" else layout.revision
    try:
        head = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return head.stdout.strip() or None


def require_utf8_name(path: Path) -> None:
    """Raises InputError for a path whose name is not UTF-8 (b'run-\\xff'): a run's name goes into
    Parquet tables, JSON and reports, which hold only text."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(path).decode("utf-8", "backslashreplace")
        raise InputError(f"{shown}: the name is not UTF-8; rename the directory to read it") from None
