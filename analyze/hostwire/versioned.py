"""Self-describing files: every hostwire file names its format and version ("hostwire-run 1");
readers accept their own and older versions and reject newer ones with a clear message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hostwire.errors import InputError


def check_format(path: Path, text: str, name: str, supported: int, where: str = "", shown: str = "") -> None:
    """Raises unless text is '<name> <version>' with version <= supported. `where` locates the
    format line (":1"), `shown` is how the expected line looks in that kind of file."""
    found, _, version = str(text).partition(" ")
    if found != name or not version.isdigit():
        expected = shown or '"format": "' + name + ' N"'
        raise InputError(f"{path}{where}: expected {expected}, got {text!r}")
    if int(version) > supported:
        raise InputError(f"{path}: format version {version} is newer than this hostwire reads "
                         f"({supported}); update hostwire")


def read_json(path: str | Path, name: str, supported: int, missing: str = "") -> dict[str, Any]:
    """A JSON object whose "format" field is '<name> <version>'. `missing` explains, when the
    file does not exist, what should have written it."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: missing" + (f" ({missing})" if missing else "")) from None
    except OSError as err:
        raise InputError(f"{path}: cannot open: {err.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        where = f"line {err.lineno}: " if isinstance(err, json.JSONDecodeError) else ""
        raise InputError(f"{path}: {where}malformed JSON: {getattr(err, 'msg', err)}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object with a \"format\" field")
    check_format(path, data.get("format", ""), name, supported)
    return data
