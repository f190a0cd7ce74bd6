"""One line of `hostwire doctor`: a facility or part, whether it is there, where, and the fix."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Finding:
    facility: str
    ok: bool
    detail: str
    fix: str = ""
