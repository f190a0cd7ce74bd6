"""What hw-bench logged (docs/formats.md, 'Benchmark logs'); hostwire.record.bench runs it."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from hostwire.errors import InputError
from hostwire.versioned import read_json
from hostwire.read.tsv import TsvFile, TsvLog, damage_entry, open_tsv, read_records, settle

log = logging.getLogger(__name__)

# each log's columns, by role (docs/formats.md)
LOG_COLUMNS = {"send": ["t_ns", "event", "bytes"], "recv": ["t_ns", "t_raw_ns", "bytes"],
               "bg": ["t_ns", "round", "primes", "largest", "ok"],
               "main": ["phase", "seq", "t1_ns", "t2_ns", "t3_ns", "t4_ns"]}


@dataclass
class BenchResult:
    """One hw-bench run: its directory of logs, exit status and bench.json summary."""

    directory: Path
    returncode: int = 0
    stderr: str = ""
    argv: list[str] = field(default_factory=list)
    _summary: dict | None = None

    @property
    def summary(self) -> dict:
        if self._summary is None:
            path = self.directory / "bench.json"
            try:
                self._summary = json.loads(path.read_text())
            except FileNotFoundError:
                raise InputError(f"{path}: missing (did hw-bench main run to its end?)") from None
            except json.JSONDecodeError as err:
                raise InputError(f"{path}: line {err.lineno}: not valid JSON: {err.msg}") from None
            except UnicodeDecodeError as err:
                raise InputError(f"{path}: byte {err.start}: not UTF-8 text") from None
        return self._summary

    @property
    def window_ns(self) -> tuple[int, int]:
        return int(self.summary["window_start_ns"]), int(self.summary["window_end_ns"])

    def processes(self, kind: str | None = None) -> list[dict]:
        procs = self.summary.get("processes", [])
        return [p for p in procs if kind is None or p["kind"] == kind]

    def meta(self, role: str) -> dict[str, str]:
        """The `#` header of one process's log (its pid, ends, ...), checked as log() checks it,
        without reading its records: what names a stream's processes needs of a long run's logs."""
        return self._open(role, tail=False).meta

    def _open(self, role: str, tail: bool = True) -> TsvFile:
        tsv = open_tsv(self.directory / f"{role}.tsv", tail=tail)
        expected = LOG_COLUMNS.get(role.split("-", 1)[0])
        if expected is not None and tsv.columns != expected:
            # a damaged column line leaves nothing to read the records by, kept or not
            raise InputError(f"{tsv.path}:{tsv.header_lines}: columns {' '.join(tsv.columns)!r}, expected "
                             f"{' '.join(expected)!r}")
        return tsv

    def log(self, role: str, *, keep_damaged: bool = False) -> TsvLog:
        """The TSV log of one process: 'send-0', 'recv-1', 'bg-0' or 'main'. Besides the checks
        of every log (hostwire.read.tsv: cut, trailer, field counts) the records must agree with the
        log's own header (a receiver's reads sum to at most its bytes_total) and, when
        bench.json is there, with the totals hw-bench main collected (events, bytes_window).
        A log that does not raises InputError naming file and line, unless keep_damaged, which
        returns its complete records with TsvLog.damage and df.attrs["damage"] set."""
        dtypes = {"t_ns": "int64", "t_raw_ns": "int64", "bytes": "int64", "round": "int64", "seq": "int64",
                  "t1_ns": "int64", "t2_ns": "int64", "t3_ns": "int64", "t4_ns": "int64"}
        tsv = self._open(role)
        df = read_records(tsv, keep_damaged=keep_damaged, dtype=dtypes, na_filter=False)
        if df.attrs["damage"] is None:
            settle(df, self._disagreement(role, tsv, df), keep_damaged)
        return TsvLog(path=tsv.path, meta=tsv.meta, df=df, damage=df.attrs["damage"])

    def _disagreement(self, role: str, tsv: TsvFile, df: pd.DataFrame) -> dict | None:
        """Damage entry when a whole-looking log contradicts its header or bench.json."""
        after = tsv.line_after(len(df))
        capacity = _int(tsv.meta.get("log_capacity"))
        if capacity is not None and len(df) > capacity:
            return damage_entry(tsv, after, None,
                                f"{len(df)} records, more than the log could hold (log_capacity {capacity})")
        if "bytes" in df.columns and "bytes_total" in tsv.meta:
            logged, total = int(df["bytes"].sum()), _int(tsv.meta["bytes_total"])
            if total is not None and logged > total:
                return damage_entry(tsv, tsv.meta_lines["bytes_total"], None,
                                    f"the reads sum to {logged} bytes, more than bytes_total {total}")
        entry = self._summary_entry(role)
        if entry is None:
            return None
        events = _int(entry.get("events"))
        if events is not None and events != len(df):
            return damage_entry(tsv, after, None,
                                f"{len(df)} records, but bench.json counts {events} events logged by {role}")
        window = _int(entry.get("bytes_window"))
        if window is None or _int(entry.get("overflow")) != 0 or "bytes" not in df.columns:
            return None
        if role.startswith("recv-"):
            logged = int(df["bytes"].sum())
        elif role.startswith("send-"):
            logged = int(df.loc[df["event"] == "write_end", "bytes"].sum())
        else:
            return None
        if logged != window:
            return damage_entry(tsv, after, None, f"the records hold {logged} bytes, but bench.json counts "
                                                  f"bytes_window {window} for {role}")
        return None

    def _summary_entry(self, role: str) -> dict | None:
        """bench.json's entry of one process, when bench.json exists and reads (a run whose main
        was killed has none: the logs' own checks are then all there is)."""
        if not (self.directory / "bench.json").is_file():
            return None
        try:
            summary = self.summary
        except InputError:
            return None
        if role.startswith("recv-"):
            entries = summary.get("receivers", [])
        else:
            entries = [p for p in summary.get("processes", []) if p.get("reported", True)]
        return next((e for e in entries if isinstance(e, dict) and e.get("role") == role), None)

    def roles(self, prefix: str) -> list[str]:
        found = sorted(self.directory.glob(f"{prefix}-*.tsv"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
        return [p.stem for p in found]

    def df_sender_events(self, *, keep_damaged: bool = False) -> pd.DataFrame:
        """All senders' events: columns t_ns, event, bytes, role, pid, index."""
        frames = []
        for role in self.roles("send"):
            entry = self.log(role, keep_damaged=keep_damaged)
            df = entry.df.assign(role=role, pid=int(entry.meta["pid"]), index=int(entry.meta["index"]))
            frames.append(df)
        if not frames:
            return pd.DataFrame(columns=["t_ns", "event", "bytes", "role", "pid", "index"])
        return _concat(frames)

    def df_received(self, *, keep_damaged: bool = False) -> pd.DataFrame:
        """All receivers' reads: columns t_ns (sender clock), t_raw_ns, bytes, role, index."""
        frames = []
        for role in self.roles("recv"):
            entry = self.log(role, keep_damaged=keep_damaged)
            frames.append(entry.df.assign(role=role, index=int(entry.meta["index"])))
        if not frames:
            return pd.DataFrame(columns=["t_ns", "t_raw_ns", "bytes", "role", "index"])
        return _concat(frames)

    def df_clock_sync(self, *, keep_damaged: bool = False) -> pd.DataFrame:
        """The clock exchanges, with rtt_ns and offset_ns per sample."""
        df = self.log("main", keep_damaged=keep_damaged).df
        return df.assign(
            rtt_ns=(df.t4_ns - df.t1_ns) - (df.t3_ns - df.t2_ns),
            offset_ns=((df.t2_ns - df.t1_ns) + (df.t3_ns - df.t4_ns)) // 2,
        )


def _int(value: object) -> int | None:
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """The logs' records together; attrs["damage"] lists the damage of every log that had some
    (None when all were whole)."""
    damage = [f.attrs["damage"] for f in frames if f.attrs.get("damage")]
    df = pd.concat(frames, ignore_index=True)
    df.attrs = {"damage": damage or None}
    return df


def load_bench(directory: str | Path) -> BenchResult:
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(f"{directory}: not a directory of hw-bench logs")
    return BenchResult(directory=directory)


BENCH_JSON_FORMAT = "hostwire-bench"
BENCH_JSON_VERSION = 1


class RunBench(BenchResult):
    """The benchmark's results as a recorded run (hostwire.run_directory.Run) reads them: bench.json through
    the versioned reader, read once."""

    verify: Callable[[str], None] | None = None  # set by Run: raises when a file differs from its digest

    @property
    def summary(self) -> dict:
        if self._summary is None:
            if self.verify is not None:
                self.verify("raw/bench/bench.json")
            self._summary = read_json(self.directory / "bench.json", BENCH_JSON_FORMAT, BENCH_JSON_VERSION,
                                      missing="did hw-bench main run to its end?")
        return self._summary
