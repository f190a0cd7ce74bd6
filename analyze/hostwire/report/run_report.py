"""`hostwire report RUN`: report.html and plots/ (PNG and SVG) for one run directory: a program
recorded by `hostwire record`, or one benchmark run of a campaign. What was recorded and lost, the
streams with the processes that sent them, why their long gaps happened and who preempted the
senders, and the figures of the campaign report drawn for this run alone (report.plots, keyed
by the run's streams): the process trace around the longest off period, the frame intervals,
IDC and the zero-loss contracts. A section whose input the run lacks (no capture, no kernel
trace, no calls) says so in place of its figure; the report is written all the same."""

from __future__ import annotations

import html
import logging
import shlex
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hostwire.report import plots
from hostwire.report.html_table import table_html
from hostwire.report.page import Section, save_figure, write_page
from hostwire.errors import HostwireError
from hostwire.linkrate import link_rate
from hostwire.metrics.compute import table
from hostwire.run_directory import Run, load_run
from hostwire.timeline.gaps import CAUSES

log = logging.getLogger(__name__)

ALL = "all streams"
MAX_SERIES = 5            # streams drawn beside "all" in the curve figures: those that carried the most
TOP_PREEMPTERS = 10
LONGEST_GAPS = 8
PROGRAM_COLOURS = ("tab:blue", "tab:cyan", "tab:purple")
PREEMPTER_COLOURS = ("tab:red", "tab:orange", "tab:brown")


def is_run_directory(path: Path) -> bool:
    """A run (manifest.json) rather than a campaign (campaign.json)."""
    return (path / "manifest.json").is_file() and not (path / "campaign.json").exists()


def _ms(ns: Any) -> float:
    return float(ns) / 1e6


def _host(addr: str) -> str:
    return f"[{addr}]" if ":" in addr else addr


class RunReport:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.run: Run = load_run(path)
        self.manifest: dict[str, Any] = dict(self.run.manifest or {})
        self.point: dict[str, Any] = dict(self.manifest.get("point") or {})
        self.program = self.point.get("kind") == "program"
        self.plots = path / "plots"
        self.sections: list[Section] = []
        self.streams = pd.DataFrame(columns=["stream", "label", "pid", "payload_bytes"])
        self.preempters: pd.DataFrame | None = None  # per task: gap_tables.Digest.per_task
        # A long run is read as hostwire gaps and metrics read it: its kernel trace in slabs (the
        # first pass leaves the Run only the trace's rare events), its capture's metrics in chunks.
        from hostwire.metrics.chunked.engine import metrics_input
        from hostwire.timeline import gap_sources

        self.metrics_input: Run | Path = metrics_input(self.run)
        with suppress(HostwireError):  # a damaged trace: kept with the Run, the sections that need it say why
            gap_sources.long_trace(self.run)

    # -- what each section reads ---------------------------------------------------------------

    def lacks(self) -> str | None:
        """Why the wire's sections cannot be drawn, or None."""
        if not self.run.has("raw/wire.pcap"):
            return "this run has no wire capture (raw/wire.pcap)"
        return None

    def label(self, stream: str, lines: int = 1) -> str:
        if stream == "all":
            return ALL
        hit = self.streams[self.streams["stream"] == stream]
        text = str(hit["label"].iloc[0]) if len(hit) else stream
        return text if lines > 1 else text.replace("\n", " ")

    def series(self) -> list[str]:
        """The streams drawn one by one: those that carried the most payload, at most MAX_SERIES."""
        ranked = self.streams.sort_values("payload_bytes", ascending=False, kind="stable")
        return [str(s) for s in ranked["stream"].head(MAX_SERIES)]

    def keyed(self, t: pd.DataFrame) -> dict[str, pd.DataFrame]:
        """A metric table split into the figure's series: all streams first (only when there are
        several), then each of series()."""
        out: dict[str, pd.DataFrame] = {}
        chosen = [s for s in self.series() if (t["stream"] == s).any()]
        if len(chosen) != 1 and (t["stream"] == "all").any():
            out[ALL] = t[t["stream"] == "all"]
        for stream in chosen:
            out[self.label(stream)] = t[t["stream"] == stream]
        return out

    def program_pids(self) -> dict[int, str]:
        """pid -> comm of the recorded program's processes that held a socket or sent a frame."""
        out: dict[int, str] = {}
        for proc in (self.manifest.get("attribution") or {}).get("processes", []):
            out[int(proc["pid"])] = str(proc["comm"])
        if self.run.has("raw/sockets.tsv"):
            sockets = self.run.df_sockets()
            out.update({int(p): str(c) for p, c in sockets.groupby("pid")["comm"].last().items() if int(p) not in out})
        return out

    # -- sections ------------------------------------------------------------------------------

    def attempt(self, title: str, make: Callable[[], Section | None]) -> None:
        try:
            section = make()
        except (HostwireError, KeyError, TypeError, ValueError) as err:  # what a run short of an input raises
            log.info("%s: %s not drawn: %s", self.path, title, err)
            section = Section(title, f"<p class=\"warn\">Not drawn: {html.escape(str(err))}</p>")
        if section is not None:
            self.sections.append(section)

    def recorded(self) -> Section:
        m, point = self.manifest, self.point
        rows: list[tuple[str, str]] = []
        if self.program:
            command = m.get("command") or {}
            argv = command.get("argv") or point.get("command") or []
            rows.append(("command", shlex.join(argv) if argv else f"--pid {command.get('pid')} (a running process)"))
            rows.append(("pid", str(command.get("pid", point.get("pid")))))
            status = command.get("exit_status")
            ended = "still running (--pid)" if status is None and not argv else str(status)
            if command.get("signal"):
                ended += f" ({command['signal']})"
            if command.get("stopped_by"):
                ended += f"; stopped by {command['stopped_by']}"
            rows.append(("exit status", ended))
        else:
            rows.append(("grid point", f"M = {point.get('senders', '?')} senders, N = {point.get('background', '?')} "
                                       f"background processes"))
            rows.append(("topology", f"{point.get('topology', '?')}, link {point.get('link_rate', '?')} "
                                     f"{point.get('link_qdisc', '')}"))
        rows.append(("status", str(self.run.status) + (f" ({self.run.reason})" if self.run.reason else "")))
        try:
            start, end = self.run.window_ns()
            rows.append(("duration", f"{(end - start) / 1e9:.3f} s (the window every figure covers)"))
        except (HostwireError, KeyError, TypeError, ValueError):
            rows.append(("duration", "unknown: the manifest has no window"))
        rows.append(("link rate", link_rate(m).describe()))
        interfaces = [i.get("name", "?") for i in (m.get("link") or {}).get("interfaces", [])] \
            if self.program else []
        rows.append(("recorded", self._collectors() + (f"; interfaces {', '.join(interfaces)}" if interfaces else "")))
        rows.append(("losses", self._losses()))
        problems = self.run.source_problems()
        if problems:
            rows.append(("sources", "; ".join(problems)))
        attribution = m.get("attribution")
        if self.program:
            if attribution:
                rows.append(("frames", f"{attribution['frames']} TCP/UDP: {attribution['frames_attributed']} of the "
                                       f"program, {attribution['frames_foreign']} foreign{self._other_frames()}"))
                rows.append(("segments", f"{attribution['segments']}: {attribution['segments_attributed']} of the "
                                         "program (a GSO/TSO super-packet counts the segments it carries)"))
            else:
                rows.append(("frames", "not attributed (the capture or raw/sockets.tsv could not be read)"))
        body = table_html(pd.DataFrame(rows, columns=["", "this run"]))
        if self.program and attribution and attribution.get("processes"):
            procs = pd.DataFrame(attribution["processes"])
            body += ("<p>The program's processes that sent or received a frame (sockets sampled from /proc every "
                     f"{(m.get('sockets') or {}).get('interval_ns', 50_000_000) / 1e6:g} ms):</p>"
                     + table_html(procs[[c for c in ("pid", "comm", "frames_sent", "frames_received", "segments_sent")
                                         if c in procs.columns]]))
        return Section("What was recorded", body)

    def _other_frames(self) -> str:
        """The frames that are neither TCP nor UDP (ARP, ICMP, ...): captured, attributed to no
        socket."""
        if not self.run.has("raw/wire.pcap"):
            return ""
        skipped = self.run.df_frames().attrs.get("skipped") or {}
        count = sum(int(n) for n in skipped.values())
        return f"; besides, {count} other frames ({', '.join(f'{k} {n}' for k, n in sorted(skipped.items()))})" \
            if count else ""

    def _collectors(self) -> str:
        parts = []
        parts.append("wire" if self.run.has("raw/wire.pcap") else "no wire capture")
        parts.append("kernel trace" if self.run.has("raw/sched.tsv") else "no kernel trace")
        if self.run.has("raw/syscalls.tsv"):
            parts.append(f"system calls ({self.point.get('syscalls', '?')})")
        elif self.run.has("raw/bench/send-*.tsv"):
            parts.append("the benchmark's write logs (no system calls)")
        else:
            parts.append("no system calls")
        if self.run.has("raw/sockets.tsv"):
            parts.append("sockets")
        return ", ".join(parts)

    def _losses(self) -> str:
        losses = self.manifest.get("losses") or {}
        bad = [f"{k} {v}" for k, v in losses.items()
               if (k.endswith("_ok") and v is False) or (not isinstance(v, bool) and isinstance(v, int) and v > 0)]
        return ", ".join(bad) if bad else f"none ({len(losses)} counters, all zero)"

    def stream_table(self) -> Section | None:
        from hostwire.timeline.build import Timeline

        if (why := self.lacks()) is not None:
            return Section("Streams", f"<p>No streams: {html.escape(why)}.</p>")
        start, end = self.run.window_ns()
        frames = self.run.df_frames()
        data = frames[(frames["payload_len"].to_numpy() > 0) & (frames["t_ns"].to_numpy() >= start)
                      & (frames["t_ns"].to_numpy() <= end)]
        flows = data.groupby([data["src"].astype(str), "sport", data["dst"].astype(str), "dport", "proto"],
                             observed=True).agg(frames=("t_ns", "size"), payload_bytes=("payload_len", "sum"))
        flows = flows.reset_index()
        flows["stream"] = [f"{_host(s)}:{sp}>{_host(d)}:{dp}" for s, sp, d, dp in
                           flows[["src", "sport", "dst", "dport"]].itertuples(index=False)]
        owners = Timeline.of(self.run).df_streams()
        # a TCP connection's payload against its data direction (a request, a control exchange)
        # is not a stream of its own
        reverse = flows["stream"].str.split(">").str[::-1].str.join(">")
        flows = flows[~((flows["proto"] == 6) & reverse.isin(set(owners["stream"])) & ~flows["stream"].isin(
            set(owners["stream"]))).to_numpy()]
        table_ = flows.merge(owners[["stream", "sender_pid", "sender_role", "receiver_pid", "receiver_role"]],
                             on="stream", how="left")
        table_["sender_pid"] = table_["sender_pid"].fillna(-1).astype(np.int64)
        table_["sender_role"] = table_["sender_role"].fillna("").astype(str)
        try:
            unique = table("goodput", self.metrics_input).set_index("stream")["bytes"]
        except HostwireError:  # no TCP stream: every flow counts its payload (UDP)
            unique = pd.Series(dtype=float)
        seconds = (end - start) / 1e9
        table_["unique_bytes"] = table_["stream"].map(unique).fillna(table_["payload_bytes"]).astype(np.int64)
        table_["goodput_mbit_s"] = table_["unique_bytes"] * 8 / max(seconds, 1e-9) / 1e6
        owner = np.where(table_["sender_pid"] > 0,
                         table_["sender_role"].where(table_["sender_role"] != "", "?") + " "
                         + table_["sender_pid"].astype(str), "foreign")
        ports = ":" + table_["sport"].astype(str) + ">:" + table_["dport"].astype(str)
        table_["label"] = owner + "\n" + ports
        table_ = table_.sort_values("payload_bytes", ascending=False, kind="stable").reset_index(drop=True)
        self.streams = table_.rename(columns={"sender_pid": "pid"})
        shown = pd.DataFrame({
            "stream": table_["stream"], "proto": table_["proto"].map({6: "tcp", 17: "udp"}).fillna("?"),
            "pid": table_["sender_pid"],
            "process": np.where(table_["sender_pid"] > 0, table_["sender_role"], "foreign"),
            "receiver": [f"{r} {int(p)}" if pd.notna(p) and int(p) > 0 else "" for p, r in
                         zip(table_["receiver_pid"], table_["receiver_role"].fillna(""))],
            "data frames": table_["frames"], "payload bytes": table_["payload_bytes"],
            "unique bytes": table_["unique_bytes"], "goodput [Mbit/s]": table_["goodput_mbit_s"]})
        text = ("<p>Each stream in the direction that carried its payload, with the process that sent it "
                + ("(the socket's holder: raw/sockets.tsv, the kernel's inet_sock_set_state, the traced calls) "
                   if self.program else "(the benchmark's logs) ")
                + "and, where this host received it too, the receiver; data frames and payload bytes in the window; "
                "unique bytes: a TCP stream's payload with each retransmitted byte counted once (a UDP flow's "
                "payload); goodput: the unique bytes over the window. A stream no process of the run held is "
                "foreign.</p>")
        return Section("Streams", text + table_html(shown, float_format="{:.3f}"))

    def gap_causes(self) -> Section:
        from hostwire.timeline import gap_sources, gap_tables

        title = "Why the long gaps happen"
        if (why := self.lacks()) is not None:
            return Section(title, f"<p>Not explained: {html.escape(why)}.</p>")
        digest = gap_tables.Digest(LONGEST_GAPS)  # what the section shows: a long run's gaps are not held
        gap_sources.explain_run(self.run, self.run.window(), digest)
        self.preempters = digest.per_task()
        text = ("<p>Every gap between two data frames of a stream longer than twice the first frame's time on the "
                "wire, split into causes that add up to it (<code>hostwire gaps RUN --summary</code>; the rules in "
                "docs/timeline.md): each cause's share of the gap time, per stream and for all, and the calls the "
                "senders' app-idle time was spent in (the top three, with their share of it).</p>")
        for sentence in digest.cannot_tell:
            text += f"<p class=\"warn\">{html.escape(sentence)}</p>"
        if not digest.count:
            return Section(title, text + "<p>No gap was longer than its threshold.</p>")
        summary = digest.summary()
        causes = [c for c in CAUSES if f"{c}_share" in summary.columns]
        shown = pd.DataFrame({"stream": [self.label(s) for s in summary["stream"]], "gaps": summary["gaps"],
                              "gap time [ms]": summary["gap_ns"].map(_ms)})
        for cause in causes:
            shown[cause.replace("_", "-")] = summary[f"{cause}_share"].astype(float)
        if (summary["waited_in"] != "").any():  # the calls app-idle time was spent in (hostwire gaps --waits)
            shown["app-idle waited in"] = summary["waited_in"]
        shares = summary.assign(key=[self.label(s, lines=2) for s in summary["stream"]]).set_index("key")
        shares = shares[[f"{c}_share" for c in causes]].rename(columns=lambda c: c[:-len("_share")]).astype(float)
        name = save_figure(plots.plot_gap_causes(shares), self.plots, "gap_causes")
        text += (table_html(shown, float_format="{:.3f}") + self._longest_gaps(digest.longest(), causes)
                 + self._preempters(self.preempters))
        return Section(title, text, [name])

    def _longest_gaps(self, top: pd.DataFrame, causes: list[str]) -> str:
        start, _ = self.run.window_ns()
        rows = pd.DataFrame({"stream": [self.label(s) for s in top["stream"]],
                             "at [s]": (top["t_start_ns"].to_numpy(np.int64) - start) / 1e9,
                             "gap [ms]": top["gap_ns"].map(_ms).to_numpy()})
        for cause in causes:
            ms = top[f"{cause}_ns"].map(_ms).to_numpy()
            if (ms > 0).any():
                rows[f"{cause.replace('_', '-')} [ms]"] = ms
        rows["preempted by"] = [";".join(str(p).split(";")[:3]) for p in top["preempted_by"].fillna("")]
        if (top["waited_in"].fillna("") != "").any():
            rows["waited in"] = [";".join(str(w).split(";")[:3]) for w in top["waited_in"].fillna("")]
        return (f"<p>The longest gaps, at most {LONGEST_GAPS} (<code>hostwire gaps RUN</code> rows; at: seconds since "
                "the window's start; preempted by: the first three tasks that ran while the sender waited, with their "
                "share; waited in: the calls the sender's thread was in during the app-idle time, with their share of it):</p>"
                + table_html(rows, float_format="{:.3f}"))

    def _preempters(self, per_task: pd.DataFrame) -> str:
        if not self.run.has("raw/sched.tsv"):
            return "<p>Who preempted the senders is not known: this run has no kernel trace (raw/sched.tsv).</p>"
        if len(per_task) == 0:
            return "<p>No sender waited runnable while another task ran: nothing preempted it.</p>"
        per = per_task.sort_values("ns", ascending=False, kind="stable")
        total = float(per["ns"].sum())
        top = per.head(TOP_PREEMPTERS)
        shown = pd.DataFrame({"pid": top["pid"], "comm": top["comm"], "role": top["role"],
                              "ran [ms]": top["ns"].map(_ms), "share": top["ns"] / total, "gaps": top["gaps"]})
        return (f"<p>The top preempters (<code>hostwire gaps RUN --preempters</code>, summed): the tasks that ran on "
                f"a sender's CPU while it waited to run, {total / 1e6:.3f} ms in all.</p>"
                + table_html(shown, float_format="{:.3f}"))

    def process_trace(self) -> Section:
        from hostwire.timeline.excerpt import longest_off_period

        title = "Process trace around the longest off period"
        if (why := self.lacks()) is not None:
            return Section(title, f"<p>Not drawn: {html.escape(why)}.</p>")
        streams = self.series()
        from hostwire.timeline.gap_sources import kernel_slabs

        slabs = kernel_slabs(self.run)
        excerpt = longest_off_period(self.run, stream=streams[0] if streams else None,
                                     running_of=None if slabs is None else slabs.running_between)
        if excerpt is None:
            return Section(title, "<p>Not drawn: the window holds fewer than two data frames of one TCP stream.</p>")
        colours: dict[str, str] | None = None
        running = excerpt.running
        if self.program and running is not None:
            running, colours = self._relabel(running)
        gap_ms = excerpt.gap_ns / 1e6
        label = self.label(excerpt.stream)
        cpus = f"CPUs {self.point.get('sender_cpus', '?')}" if self.program else "sender's CPU"
        figure = plots.plot_process_trace(excerpt.frames, excerpt.writes, running, excerpt.t0_ns,
                                          f"{label}: longest off period {gap_ms:.1f} ms", colours, cpus)
        name = save_figure(figure, self.plots, "process_trace")
        what = "send calls" if self.program else "writes"
        text = (f"<p>The longest gap between two data frames of {html.escape(label)}, the stream that carried the "
                f"most ({gap_ms:.1f} ms, at 0): data frames of every stream (bars) and the senders' {what} (dots)")
        if running is None:
            text += ("; this run has no kernel trace (raw/sched.tsv), so which task ran on the CPUs is not shown")
        else:
            text += f"; below, which task ran on the {html.escape(cpus)}"
            if self.program:
                text += " (the program's processes and the top preempters by name, the rest by role)"
        if len(excerpt.writes) == 0:
            text += ("; no " + what + " in this span" + ("" if self.run.has("raw/syscalls.tsv") or not self.program
                                                         else ": the calls were not recorded (--syscalls none)"))
        return Section(title, text + ".</p>", [name])

    def _relabel(self, running: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
        """The program's processes and its top preempters named "comm pid" in the trace's rows,
        each a colour; every other task keeps its role (other, collector, idle)."""
        mine = self.program_pids()
        preempters: list[int] = []
        if self.preempters is not None and len(self.preempters):
            ranked = self.preempters.groupby("pid")["ns"].sum().sort_values(ascending=False)
            preempters = [int(p) for p in ranked.index if int(p) not in mine and int(p) != 0][:len(PREEMPTER_COLOURS)]
        pid = running["pid"].to_numpy(np.int64)
        named = np.isin(pid, [*mine, *preempters])
        role = running["role"].astype(str).to_numpy(dtype=object)
        role[named] = running["comm"].astype(str).to_numpy()[named] + " " + pid[named].astype(str)
        colours: dict[str, str] = {}
        for k, p in enumerate(sorted(set(pid[np.isin(pid, list(mine))].tolist()))):
            colours[f"{running['comm'].to_numpy()[pid == p][-1]} {p}"] = PROGRAM_COLOURS[k % len(PROGRAM_COLOURS)]
        for k, p in enumerate(p for p in preempters if (pid == p).any()):
            colours[f"{running['comm'].to_numpy()[pid == p][-1]} {p}"] = PREEMPTER_COLOURS[k]
        return running.assign(role=role), colours

    def intervals(self) -> Section:
        title = "Frame intervals"
        if (why := self.lacks()) is not None:
            return Section(title, f"<p>Not drawn: {html.escape(why)}.</p>")
        hist = table("intervals", self.metrics_input, hist=True)
        stats = table("intervals", self.metrics_input)
        stats = stats[stats["kind"] == "frame"]
        shown = pd.DataFrame({"stream": [self.label(s) for s in stats["stream"]], "intervals": stats["count"]})
        for q in ("p50", "p99", "max"):
            shown[f"{q} [ms]"] = stats[f"{q}_ns"].map(_ms).to_numpy()
        text = ("<p>The share of intervals longer than x, on log-log axes so that the long gaps show: left, the "
                "intervals between a stream's data frames on the link (all streams: between any two); right, "
                + ("between one process's writes." if not self.program else
                   "a benchmark's writes, which a recorded program does not have (its send calls are in the process "
                   "trace).") + "</p>")
        name = save_figure(plots.plot_interval_distributions(self.keyed(hist)), self.plots, "intervals")
        return Section(title, text + table_html(shown, float_format="{:.3f}"), [name])

    def idc(self) -> Section:
        title = "Index of dispersion for counts"
        if (why := self.lacks()) is not None:
            return Section(title, f"<p>Not drawn: {html.escape(why)}.</p>")
        name = save_figure(plots.plot_idc_curves(self.keyed(table("idc", self.metrics_input))), self.plots, "idc")
        return Section(title, "<p>IDC(t) = Var(N_t)/E(N_t) of the data frames counted in bins of length t: 1 for a "
                       "Poisson stream (dashed), rising with t where the traffic comes in bursts that bins of that "
                       "length still see apart.</p>", [name])

    def contracts(self) -> Section:
        title = "Zero-loss traffic contracts"
        if (why := self.lacks()) is not None:
            return Section(title, f"<p>Not drawn: {html.escape(why)}.</p>")
        name = save_figure(plots.plot_contract_curves(self.keyed(table("contract", self.metrics_input, points=20))),
                           self.plots, "contracts")
        return Section(title, "<p>The smallest maximum burst size (ATM cells) that lets every cell of the stream "
                       "conform to a dual leaky bucket, against its sustainable cell rate; the peak cell rate is "
                       f"the link's ({html.escape(link_rate(self.manifest).describe())}). A bursty stream needs a "
                       "large burst size until the rate nears its peak.</p>", [name])

    def build(self) -> Path:
        self.attempt("What was recorded", self.recorded)
        self.attempt("Streams", self.stream_table)
        for title, step in (("Why the long gaps happen", self.gap_causes),
                            ("Process trace around the longest off period", self.process_trace),
                            ("Frame intervals", self.intervals), ("Index of dispersion for counts", self.idc),
                            ("Zero-loss traffic contracts", self.contracts)):
            self.attempt(title, step)
        run_id = str(self.manifest.get("run_id", self.path.name))
        what = "recorded program" if self.program else "run"
        byline = f"Made {time.strftime('%Y-%m-%d %H:%M')} from {html.escape(str(self.path))}."
        return write_page(self.path / "report.html", f"hostwire: {run_id}", f"hostwire {what} {run_id}", byline,
                          self.sections)


def build_run_report(path: str | Path) -> Path:
    return RunReport(Path(path)).build()
