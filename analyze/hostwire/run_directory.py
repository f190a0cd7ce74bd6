"""A recorded run directory (DESIGN.md section 7) as DataFrames on the run's reference clock, the
sender host's CLOCK_MONOTONIC: the one object through which every analysis of a run reads it.

A Run reads each raw file once and keeps what it read: the capture is decoded on the first `df_frames()` and kept for
every later caller (metrics, summary, report), and so are the benchmark's logs, the tables built from them,
`bench.json`, `wirecap.json`, `sched.json`, `syscalls.json`, `resources.tsv`, `sched.tsv` and `syscalls.tsv`. A read
that fails is kept too: asking again raises the same error without reading again. Every JSON file goes through
hostwire.versioned.read_json, which rejects another format or a newer version. A DataFrame a Run returns is a shallow
copy of the one it keeps (pandas copy-on-write): a caller may change it freely.

An analysis declares the raw files it reads (`Needs`: groups of alternatives, one file of each group required, others
used when present). `run.can(needs)` and `run.missing_for(needs)` tell before any work whether this run has them, and
`run.require(needs)` raises an InputError naming what is missing ("goodput needs raw/wire.pcap or raw/bench/recv-*.tsv;
this run has neither"). A metric kind's declaration is hostwire.metrics.needs.needs_of(kind). The joined timeline of a
run is hostwire.timeline.build.Timeline, built from a Run; the Run knows nothing of it, and this module imports nothing
of the recording side (hostwire.record)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from hostwire.read.bench import BenchResult, RunBench
from hostwire.errors import HostwireError, InputError
from hostwire.manifest import MANIFEST_FORMAT, check_raw_file, check_seal, effective_status, file_digest
from hostwire.read.needs import Needs
from hostwire.read.syscalls import read_in_pieces, read_syscalls, read_syscalls_of
from hostwire.read.tsv import TsvLog
from hostwire.versioned import read_json
from hostwire.window import Window

SUPPORTED_MANIFEST_VERSION = int(MANIFEST_FORMAT.split()[1])

T = TypeVar("T")

# What a reader takes for a run-point field that the manifest lacks: the recording side's own
# defaults (hostwire.record.point.RunPoint; a test holds the two equal, since nothing of the
# reading side imports the recording side).
POINT_DEFAULTS: dict[str, Any] = {"sender_cpus": "0", "receiver_cpus": "1", "sender_cpu_share": 0.0}


def _stream_name(src: str, dst: str) -> str:
    return f"{src}>{dst}"


class Run:
    """One run. `df_*` methods return DataFrames with documented columns; stamps are int64 ns.
    What a method read is kept for the next caller (see the module doc)."""

    def __init__(self, path: str | Path, manifest: dict[str, Any]) -> None:
        self.path = Path(path)
        self.manifest = manifest
        self.bench: BenchResult = RunBench(directory=self.path / "raw" / "bench")
        self.bench.verify = self.verify  # type: ignore[attr-defined]
        self._kept: dict[Hashable, Any] = {}

    def raw_damage(self, relative: str) -> str | None:
        """Why a raw file (path relative to the run) differs from the size and sha256 its runner
        recorded when the run completed; None when it matches or none was recorded."""
        key = ("digest", relative)
        if key not in self._kept:
            self._kept[key] = check_raw_file(self.path, self.manifest, relative,
                                             digest=lambda: self.digest_of(relative))
        return self._kept[key]  # type: ignore[no-any-return]

    def digest_of(self, relative: str) -> str | None:
        """sha256 of a file of the run (path relative to it) as it is on disk, computed once for
        this Run; None when the file cannot be read."""
        key = ("sha256", relative)
        if key not in self._kept:
            try:
                self._kept[key] = file_digest(self.path / relative)
            except OSError:
                self._kept[key] = None
        return self._kept[key]  # type: ignore[no-any-return]

    def sources(self) -> dict[str, str | None]:
        """What a cache made from this run is made from: {path relative to the run: sha256 on disk,
        None when missing} of every raw file on disk or in the manifest's raw_digests, and the
        manifest's content under "manifest.json". Every file is digested (once per Run): a cache
        is valid only while this equals what it recorded, and no size or time stands in for it."""
        def make() -> dict[str, str | None]:
            files = {str(p.relative_to(self.path)) for p in (self.path / "raw").rglob("*") if p.is_file()}
            files |= set((self.manifest.get("raw_digests") or {}))
            out: dict[str, str | None] = {rel: self.digest_of(rel) for rel in sorted(files)}
            out["manifest.json"] = hashlib.sha256(json.dumps(self.manifest, sort_keys=True).encode()).hexdigest()
            return out
        return dict(self._keep("sources", make))

    def sources_fingerprint(self) -> str:
        """One sha256 over sources()."""
        return hashlib.sha256(json.dumps(self.sources(), sort_keys=True).encode()).hexdigest()

    def source_problems(self) -> list[str]:
        """Each raw file the runner recorded a digest for that is missing or differs from it, in
        one line each ([] when all match or the run recorded none)."""
        return [p for rel in sorted(self.manifest.get("raw_digests") or {}) if (p := self.raw_damage(rel))]

    def verify(self, relative: str) -> None:
        """Raises InputError when a raw file differs from what its runner recorded."""
        problem = self.raw_damage(relative)
        if problem:
            raise InputError(problem)

    def _mark(self, relative: str, df: pd.DataFrame, keep_damaged: bool) -> pd.DataFrame:
        """df as read from a raw file, checked against the file's digest: a difference raises, or
        with keep_damaged marks df as damaged (the reader found nothing, so the whole file is
        suspect)."""
        problem = self.raw_damage(relative)
        if not problem:
            return df
        if not keep_damaged:
            raise InputError(problem)
        if not df.attrs.get("damage"):
            df = df.copy(deep=False)
            df.attrs = {**df.attrs, "damage": {"file": str(self.path / relative), "message": problem}}
        return df

    def keep(self, key: Hashable, make: Callable[[], T]) -> T:
        """What `make` returns, made once for this Run and kept with it (a reader built on a Run,
        such as hostwire.timeline.build.Timeline, keeps itself here): an error is kept too."""
        return self._keep(("kept", key), make)

    def forget(self, *keys: Hashable) -> None:
        """Lets go of what was read (df_frames: "frames", df_syscalls: "syscalls") or kept (keep's
        keys) under these keys; a later call reads or makes it again. A long analysis drops the
        whole tables it has turned into the smaller ones it goes on with."""
        for key in keys:
            self._kept.pop(key, None)
            self._kept.pop(("kept", key), None)

    def keeps(self, key: Hashable) -> bool:
        """Whether something read or kept under key (as for forget) is held by this Run."""
        return key in self._kept or ("kept", key) in self._kept

    def _keep(self, key: Hashable, read: Callable[[], T]) -> T:
        """read() on the first call for key; its result, or the HostwireError it raised, is kept
        and given (raised) again on every later call."""
        if key not in self._kept:
            try:
                self._kept[key] = read()
            except HostwireError as err:
                self._kept[key] = err
        value = self._kept[key]
        if isinstance(value, HostwireError):
            raise value.with_traceback(None)
        return value  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ manifest and status

    @property
    def status(self) -> str:
        """complete, partial or failed; a run whose runner was killed before it could mark it is
        partial (see hostwire.manifest.effective_status)."""
        return effective_status(self.manifest)[0]

    @property
    def reason(self) -> str:
        return effective_status(self.manifest)[1]

    @property
    def losses(self) -> dict[str, Any]:
        return dict(self.manifest.get("losses", {}))

    @property
    def point(self) -> dict[str, Any]:
        """The run point the runner recorded (hostwire.record.point.RunPoint as a dict; {} when absent)."""
        point = self.manifest.get("point")
        return dict(point) if isinstance(point, dict) else {}

    def point_value(self, name: str) -> Any:
        """One run-point field as recorded, else its default (POINT_DEFAULTS)."""
        value = self.point.get(name)
        return POINT_DEFAULTS[name] if value is None else value

    # ------------------------------------------------------------------ declared needs

    def has(self, pattern: str) -> bool:
        """Whether the run holds a file at `pattern` (relative to the run directory; a glob
        pattern matches when some file does)."""
        if any(c in pattern for c in "*?["):
            return any(p.is_file() for p in self.path.glob(pattern))
        return (self.path / pattern).is_file()

    def missing_for(self, needs: Needs) -> list[str]:
        """The required inputs of `needs` (for a metric kind: hostwire.metrics.needs.needs_of) this
        run lacks, each as its alternatives 'a or b'; [] when it has them all."""
        return [" or ".join(need.files) for need in needs.required if not any(map(self.has, need.files))]

    def can(self, needs: Needs) -> bool:
        """Whether this run has every required input of `needs` (see missing_for): a report asks
        before it draws. Damage is not judged here: a damaged file is there, and the analysis
        says where it is damaged."""
        return not self.missing_for(needs)

    def require(self, needs: Needs) -> None:
        """Raises InputError naming the run and each required input it lacks, before any work."""
        lacking = [need for need in needs.required if not any(map(self.has, need.files))]
        if lacking:
            raise InputError(f"{self.path}: " + "; ".join(need.message(needs.name) for need in lacking))

    # ------------------------------------------------------------------ the window

    def window(self, last_frame_ns: int | None = None) -> Window:
        """window_ns() as the Window every stage cuts by."""
        return Window(*self.window_ns(last_frame_ns))

    def window_ns(self, last_frame_ns: int | None = None) -> tuple[int, int]:
        """The logging window (start, end) in ns. For a complete run whose manifest holds it: the
        logging window. Otherwise (a run interrupted, partial or failed, or a manifest without
        window_ns) the window that was recorded: from the planned start up to the last recorded
        event, never beyond the planned end. The last recorded event is the latest record of the
        benchmark's process logs (send-*, recv-*, bg-*) or `last_frame_ns` (a caller that read the
        capture gives its last frame carrying payload); with none, the window is empty.
        window_warning() says when and why the window was cut."""
        start, end = self.planned_window_ns()
        if not self.window_is_recorded_only():
            return start, end
        candidates = [t for t in (self.last_record_ns(), last_frame_ns) if t is not None]
        if not candidates:
            return start, start
        return start, max(start, min(end, max(candidates)))

    def planned_window_ns(self) -> tuple[int, int]:
        """The logging window as planned: the manifest's window_ns, else bench.json's, else the
        `# window_start_ns` / `# window_end_ns` headers of the benchmark's logs."""
        window = self.manifest.get("window_ns")
        if window:
            return int(window[0]), int(window[1])
        try:
            return self.bench.window_ns
        except (HostwireError, KeyError, TypeError, ValueError):
            pass
        from hostwire.read.tsv import read_header

        for path in self._process_logs():
            try:
                meta = read_header(path)[0]
                return int(meta["window_start_ns"]), int(meta["window_end_ns"])
            except (HostwireError, KeyError, ValueError):
                continue
        raise InputError(f"{self.path}: the run has no logging window (no window_ns in manifest.json, "
                         "no readable raw/bench/bench.json, no window in the logs' headers)")

    def window_is_recorded_only(self) -> bool:
        """True when the planned window cannot be trusted to have been recorded: the run is not
        complete or its manifest has no window_ns."""
        return self.status != "complete" or not self.manifest.get("window_ns")

    def window_warning(self, last_frame_ns: int | None = None) -> str | None:
        """Why the window is cut to what was recorded (None for a complete run's full window)."""
        if not self.window_is_recorded_only():
            return None
        start, end = self.planned_window_ns()
        got = self.window_ns(last_frame_ns)
        why = (f"the run is {self.status}" + (f" ({self.reason})" if self.reason else "")
               if self.status != "complete" else "the manifest has no window_ns")
        if got[1] >= end:
            return f"{why}: its events reach the planned end of the window ({(end - start) / 1e9:.6g} s)"
        return (f"{why}: the window is what was recorded, {(got[1] - got[0]) / 1e9:.6g} s of the planned "
                f"{(end - start) / 1e9:.6g} s")

    def last_record_ns(self) -> int | None:
        """The latest stamp in the benchmark's process logs (records of a damaged log up to its
        damage); None without any record."""
        return self._keep("last_record", self._last_record)

    def _last_record(self) -> int | None:
        last: int | None = None
        for path in self._process_logs():
            try:
                df = self._log(path.stem, keep_damaged=True).df
            except HostwireError:
                continue
            if "t_ns" in df.columns and len(df):
                value = int(pd.to_numeric(df["t_ns"], errors="coerce").max())
                last = value if last is None else max(last, value)
        return last

    def _process_logs(self) -> list[Path]:
        directory = self.path / "raw" / "bench"
        return sorted(p for p in directory.glob("*-*.tsv") if p.stem.split("-")[0] in ("send", "recv", "bg"))

    # ------------------------------------------------------------------ JSON files

    def bench_summary(self) -> dict[str, Any]:
        """raw/bench/bench.json (per-process totals, window, clock sync, receiver ports)."""
        return self.bench.summary

    def wirecap(self) -> dict[str, Any]:
        """raw/wirecap.json: the capture's loss counters and clock pairs."""
        from hostwire.read.pcap import read_wirecap_json

        self.verify("raw/wirecap.json")
        return self._keep("wirecap.json", lambda: read_wirecap_json(self.path / "raw" / "wirecap.json"))

    def sched_summary(self) -> dict[str, Any]:
        """raw/sched.json: hw-schedtrace's per-CPU loss counters and clock check."""
        from hostwire.read.sched import read_sched_json

        self.verify("raw/sched.json")
        return self._keep("sched.json", lambda: read_sched_json(self.path / "raw" / "sched.json"))

    def syscall_counters(self) -> dict[str, Any]:
        """raw/syscalls.json: the system-call tracer's counters."""
        from hostwire.read.syscalls import read_counters

        self.verify("raw/syscalls.json")
        return self._keep("syscalls.json", lambda: read_counters(self.path / "raw" / "syscalls.json"))

    # ------------------------------------------------------------------ the benchmark's logs

    def log(self, role: str, *, keep_damaged: bool = False) -> TsvLog:
        """The log of one benchmark process ('send-0', 'recv-1', 'bg-0', 'main'), checked like
        every raw file of the run."""
        return self._log(role, keep_damaged=keep_damaged)

    def _log(self, role: str, *, keep_damaged: bool = False) -> TsvLog:
        """The log of one benchmark process (hostwire.read.bench.BenchResult.log), read once: a whole
        log serves a caller that keeps damage and one that does not alike."""
        relative = f"raw/bench/{role}.tsv"
        problem = self.raw_damage(relative)
        whole = self._kept.get(("log", role, not keep_damaged))
        if isinstance(whole, TsvLog) and whole.damage is None and not problem:
            return whole
        # The reader first: its error names the line; the digest tells of damage it cannot see.
        entry = self._keep(("log", role, keep_damaged), lambda: self.bench.log(role, keep_damaged=keep_damaged))
        if problem and not keep_damaged:
            raise InputError(problem)
        if problem and entry.damage is None:
            entry.damage = {"file": str(self.path / relative), "message": problem}
            entry.df.attrs["damage"] = entry.damage
        return entry

    def df_writes(self, *, keep_damaged: bool = False) -> pd.DataFrame:
        """The senders' write() calls: `t_ns` (start of the call), `t_end_ns`, `pid`, `role`,
        `stream` (src:port>dst:port), `bytes` (bytes written), `bytes_requested`. A damaged log
        raises InputError naming file and line, unless keep_damaged: then its records before the
        damage count and attrs["damage"] lists each damaged log (None when all are whole)."""
        return self._keep(("writes", keep_damaged), lambda: self._writes(keep_damaged)).copy(deep=False)

    def _writes(self, keep_damaged: bool) -> pd.DataFrame:
        frames, damage = [], []
        for role in self.bench.roles("send"):
            entry = self._log(role, keep_damaged=keep_damaged)
            if entry.damage:
                damage.append(entry.damage)
            df = entry.df
            starts = df.index[df["event"] == "write_start"]
            # A write_end follows its write_start directly in the log.
            ends = starts + 1
            ok = ends < len(df)
            starts, ends = starts[ok], ends[ok]
            ends_df = df.loc[ends]
            complete = (ends_df["event"] == "write_end").to_numpy()
            starts, ends = starts[complete], ends[complete]
            frames.append(pd.DataFrame({
                "t_ns": df.loc[starts, "t_ns"].to_numpy(),
                "t_end_ns": df.loc[ends, "t_ns"].to_numpy(),
                "pid": int(entry.meta["pid"]),
                "role": role,
                "stream": _stream_name(entry.meta.get("local", "?"), entry.meta.get("peer", "?")),
                "bytes": df.loc[ends, "bytes"].to_numpy(),
                "bytes_requested": df.loc[starts, "bytes"].to_numpy(),
            }))
        columns = ["t_ns", "t_end_ns", "pid", "role", "stream", "bytes", "bytes_requested"]
        if not frames:
            out = pd.DataFrame(columns=columns)
        else:
            out = pd.concat(frames, ignore_index=True).sort_values("t_ns", kind="stable").reset_index(drop=True)
        out.attrs = {"damage": damage or None}
        return out

    def df_received(self, *, keep_damaged: bool = False) -> pd.DataFrame:
        """The receivers' reads: `t_ns` (sender clock), `t_raw_ns`, `bytes`, `role`, `stream`.
        Damaged logs as for df_writes."""
        return self._keep(("received", keep_damaged), lambda: self._received(keep_damaged)).copy(deep=False)

    def _received(self, keep_damaged: bool) -> pd.DataFrame:
        frames, damage = [], []
        for role in self.bench.roles("recv"):
            entry = self._log(role, keep_damaged=keep_damaged)
            if entry.damage:
                damage.append(entry.damage)
            frames.append(entry.df.assign(
                role=role, stream=_stream_name(entry.meta.get("peer", "?"), entry.meta.get("local", "?"))))
        if not frames:
            out = pd.DataFrame(columns=["t_ns", "t_raw_ns", "bytes", "role", "stream"])
        else:
            out = pd.concat(frames, ignore_index=True).sort_values("t_ns", kind="stable").reset_index(drop=True)
        out.attrs = {"damage": damage or None}
        return out

    def df_clock_sync(self, *, keep_damaged: bool = False) -> pd.DataFrame:
        """The benchmark's clock exchanges (raw/bench/main.tsv) with rtt_ns and offset_ns per
        sample (hostwire.read.bench.BenchResult.df_clock_sync)."""
        table = self._keep(("clock_sync", keep_damaged), lambda: self.bench.df_clock_sync(keep_damaged=keep_damaged))
        return self._mark("raw/bench/main.tsv", table, keep_damaged).copy(deep=False)

    # ------------------------------------------------------------------ other raw tables

    def df_resources(self) -> pd.DataFrame:
        """The host's /proc/stat samples during the run (see hostwire.read.resources); pass them to
        hostwire.read.resources.df_cpu_use for busy and stolen shares per interval."""
        return self._mark("raw/resources.tsv", self._keep("resources", self._resources), False).copy(deep=False)

    def _resources(self) -> pd.DataFrame:
        path = self.path / "raw" / "resources.tsv"
        if not path.exists():
            raise InputError(f"{path}: missing: this run has no resource samples")
        from hostwire.read.resources import read_resources

        return read_resources(path)

    def df_sched(self) -> pd.DataFrame:
        """raw/sched.tsv, the kernel timeline (hostwire.read.sched.read_sched_tsv); its `#` metadata
        in attrs["meta"]."""
        return self._mark("raw/sched.tsv", self._keep("sched", self._sched), False).copy(deep=False)

    def _sched(self) -> pd.DataFrame:
        path = self.path / "raw" / "sched.tsv"
        if not path.exists():
            raise InputError(f"{path}: missing: this run has no kernel trace")
        from hostwire.read.sched import read_sched_tsv

        return read_sched_tsv(path)[1]

    def use_sched_events(self, events: pd.DataFrame) -> None:
        """Serve `events` as raw/sched.tsv's table from now on: a reader that reads the trace in
        slabs (hostwire.timeline.kernel_slabs) keeps the rare events the run's roles, streams and
        command need, so that no builder reads the whole trace."""
        self._kept["sched"] = events

    def df_syscalls(self, calls: tuple[str, ...] | None = None) -> pd.DataFrame:
        """raw/syscalls.tsv, the benchmark's I/O system calls (hostwire.read.syscalls.read_syscalls).
        calls: only these calls' records (index from 0); from a file longer than one piece of
        read_syscalls_of they are read piece by piece and kept under ("syscalls", calls), unless
        this Run holds the whole table: a long run's other calls are never held."""
        if calls is not None and not self.keeps("syscalls") and read_in_pieces(self.path / "raw" / "syscalls.tsv"):
            return self._mark("raw/syscalls.tsv", self._keep(("syscalls", calls), lambda: self._syscalls(calls)),
                              False).copy(deep=False)
        whole = self._mark("raw/syscalls.tsv", self._keep("syscalls", self._syscalls), False)
        return whole.copy(deep=False) if calls is None else whole[whole["call"].isin(calls).to_numpy()].reset_index(drop=True)

    def _syscalls(self, calls: tuple[str, ...] | None = None) -> pd.DataFrame:
        path = self.path / "raw" / "syscalls.tsv"
        if not path.exists():
            raise InputError(f"{path}: missing: this run traced no system calls")
        return read_syscalls(path) if calls is None else read_syscalls_of(path, calls)

    def df_sockets(self) -> pd.DataFrame:
        """raw/sockets.tsv of a program recorded by hostwire record: which of its processes held
        which socket (hostwire.read.sockets.read_sockets)."""
        return self._mark("raw/sockets.tsv", self._keep("sockets", self._sockets), False).copy(deep=False)

    def _sockets(self) -> pd.DataFrame:
        path = self.path / "raw" / "sockets.tsv"
        if not path.exists():
            raise InputError(f"{path}: missing: this run is not a recorded program's")
        from hostwire.read.sockets import read_sockets

        return read_sockets(path)

    # ------------------------------------------------------------------ the wire

    def df_frames(self, *, keep_damaged: bool = False) -> pd.DataFrame:
        """The wire capture's frames with `t_ns` on the run's clock (see hostwire.read.pcap.read_pcap),
        decoded once per Run. A damaged capture raises InputError naming the file and byte offset,
        unless keep_damaged: then the frames before the damage, with attrs["damage"] set."""
        frames = self._keep("frames", self._decode)
        damage = frames.attrs.get("damage")
        if damage and not keep_damaged:
            raise InputError(str(damage.get("message") if isinstance(damage, dict) else damage))
        frames = self._mark("raw/wirecap.json", self._mark("raw/wire.pcap", frames, keep_damaged), keep_damaged)
        return frames.copy(deep=False)

    def _decode(self) -> pd.DataFrame:
        pcap = self.path / "raw" / "wire.pcap"
        if not pcap.exists():
            raise InputError(f"{pcap}: missing: this run has no wire capture")
        from hostwire.read.pcap import read_pcap

        pairs = self.wirecap().get("clock_pairs") if (self.path / "raw" / "wirecap.json").exists() else None
        return read_pcap(pcap, clock_pairs=pairs, keep_damaged=True)


def load_run(path: str | Path) -> Run:
    """Opens a run directory written by the runner (complete or partial)."""
    path = Path(path)
    manifest_path = path / "manifest.json"
    if not manifest_path.exists():
        raise InputError(f"{path}: not a run directory (no manifest.json)")
    manifest = read_json(manifest_path, "hostwire-run", SUPPORTED_MANIFEST_VERSION)
    check_seal(manifest_path, manifest)
    return Run(path, manifest)
