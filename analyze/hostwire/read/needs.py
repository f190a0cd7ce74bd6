"""What an analysis declares it reads of a run: groups of raw files, one file of each group
required, the others used when present (hostwire.run_directory.Run answers `can`, `missing_for` and
`require` for them; hostwire.metrics.needs declares each metric kind's)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Need:
    """One raw input of an analysis: any one of `files` will do (paths relative to the run
    directory; glob patterns such as raw/bench/recv-*.tsv match when some file does). `what`
    names the input in a message when there is a single file to name."""

    files: tuple[str, ...]
    what: str = ""

    def message(self, name: str) -> str:
        """'<name> needs a or b; this run has neither'."""
        if len(self.files) == 1:
            has = f"no {self.what}" if self.what else "no such file"
        else:
            has = "neither" if len(self.files) == 2 else "none of them"
        return f"{name} needs {' or '.join(self.files)}; this run has {has}"


@dataclass(frozen=True)
class Needs:
    """The raw files one analysis reads: one file of each `required` group, and the `optional`
    ones when present (patterns relative to the run directory)."""

    name: str
    required: tuple[Need, ...] = ()
    optional: tuple[str, ...] = ()
