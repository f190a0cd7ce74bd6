"""`hostwire report CAMPAIGN`: report.html and plots/ (PNG and SVG) from an analysed campaign
(summary.parquet and each run's tables/), with the 1997 paper's figures beside today's where the
paper gave a number (hostwire/data/paper1997.json)."""

from __future__ import annotations

import html
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hostwire import plots
from hostwire.errors import HostwireError, InputError
from hostwire.metrics.goodput import goodput_against_mix

log = logging.getLogger(__name__)

REFERENCE = Path(__file__).with_name("data") / "paper1997.json"
TRACE_SPAN_NS = 600_000_000  # the process trace shows 0.6 s around the longest off period


def load_reference() -> dict[str, Any]:
    from hostwire.versioned import read_json

    return read_json(REFERENCE, "hostwire-reference", 1)


@dataclass
class Section:
    title: str
    body: str
    figures: list[str] = field(default_factory=list)


def _table_html(df: pd.DataFrame, classes: pd.Series | None = None, float_format: str = "{:.4g}") -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    rows = []
    for i, row in enumerate(df.itertuples(index=False)):  # itertuples keeps each column's type
        cells = []
        for value in row:
            if isinstance(value, float):
                text = "" if np.isnan(value) else float_format.format(value)
            else:
                text = str(value)
            cells.append(f"<td>{html.escape(text)}</td>")
        cls = f' class="{classes.iloc[i]}"' if classes is not None and classes.iloc[i] else ""
        rows.append(f"<tr{cls}>{''.join(cells)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


class ReportBuilder:
    def __init__(self, campaign: Path) -> None:
        self.campaign = campaign
        self.plots = campaign / "plots"
        self.sections: list[Section] = []
        path = campaign / "summary.parquet"
        if not path.exists():
            raise InputError(f"{path}: missing; run 'hostwire analyze {campaign}' first")
        try:
            self.summary = pd.read_parquet(path)
        except (OSError, ValueError) as err:
            raise InputError(f"{path}: cannot read: {err}") from None
        if len(self.summary) == 0:
            raise InputError(f"{path}: no runs")
        self.reference = load_reference()

    def save(self, fig: Any, name: str) -> str:
        import matplotlib.pyplot as plt

        self.plots.mkdir(exist_ok=True)
        fig.savefig(self.plots / f"{name}.png", dpi=110)
        fig.savefig(self.plots / f"{name}.svg")
        plt.close(fig)
        return name

    def per_point_tables(self, table: str) -> dict[tuple[int, int], pd.DataFrame]:
        out: dict[tuple[int, int], list[pd.DataFrame]] = {}
        for row in self.summary.itertuples():
            path = self.campaign / str(row.directory) / "tables" / f"{table}.parquet"
            if not path.exists():
                continue
            df = pd.read_parquet(path)
            if len(df):
                out.setdefault((int(row.senders), int(row.background)), []).append(df)
        return {k: pd.concat(v, ignore_index=True) for k, v in out.items()}

    # -- sections ------------------------------------------------------------------------------

    def overview(self) -> None:
        s = self.summary
        marked = int(s["marked"].fillna(1).astype(int).sum()) if "marked" in s else 0
        not_complete = int((s["status"] != "complete").sum())
        book = self._campaign_json()
        host = book.get("host", {}) if book else {}
        emulated = bool(host.get("emulated"))
        lines = [
            f"<p>{len(s)} runs; {len(s) - not_complete} complete, {not_complete} not; {marked} marked "
            "(a loss, a damaged source, a failed check or a figure above the link's maximum).</p>",
            f"<p>Host: {html.escape(str(host.get('kernel_release', '?')))}, "
            f"{html.escape(str(host.get('cpu_model', '?')))}, {host.get('cpus', '?')} CPUs, clock source "
            f"{html.escape(str(host.get('clocksource', '?')))}.</p>",
        ]
        guests = int(s["timing_emulated"].fillna(0).astype(int).sum()) if "timing_emulated" in s else 0
        if guests:
            kernels = sorted({str(k) for k in s.get("vm_kernel", pd.Series(dtype=str)).dropna() if str(k)})
            lines.append(f'<p class="warn">Timings are emulated: {guests} of {len(s)} runs were recorded in a '
                         f"freshly booted QEMU guest without KVM ({html.escape(', '.join(kernels))} kernel), "
                         "whose clocks run at the emulator's pace: compare shapes, not absolute times.</p>")
        elif emulated:
            lines.append('<p class="warn">Timings are emulated (software virtual machine): compare shapes, '
                         "not absolute times.</p>")
        self.sections.append(Section("Campaign", "".join(lines)))

    def sanity(self) -> None:
        s = self.summary
        columns = [c for c in ("run_id", "senders", "background", "repetition", "status", "marked", "frames",
                               "impossible_share", "tcp_retransmissions", "qdisc_drops", "capture_drops",
                               "trace_overruns", "log_overflows", "damaged_sources", "reason", "errors")
                   if c in s.columns]
        table = s[columns].copy()
        bad = (s["status"] != "complete") | (s.get("marked", pd.Series(0, index=s.index)).fillna(1) != 0)
        classes = bad.map({True: "bad", False: ""})
        self.sections.append(Section(
            "Sanity of every run",
            "<p>Rows in red are runs that are not complete or are marked; their figures below are drawn "
            "hollow or left out of fits. <code>hostwire metrics sanity RUN --check</code> names the cause.</p>"
            + _table_html(table, classes)))

    def goodput(self) -> None:
        s = self.summary
        if "goodput_bit_s" not in s or s["goodput_bit_s"].notna().sum() == 0:
            return
        usable = s[s["goodput_bit_s"].notna() & (s["senders"] > 0)]
        fit = None
        text = ""
        try:
            fit = goodput_against_mix(usable["senders"].to_numpy(), usable["background"].to_numpy(),
                                      usable["goodput_bit_s"].to_numpy())
            text = (f"<p>Pearson r of goodput against M/(M+N): <b>{fit['pearson_r']:.2f}</b> over {fit['runs']} "
                    f"runs (paper: {self.reference['goodput_vs_mix']['pearson_r']}); slope "
                    f"{fit['slope_bit_s'] / 1e6:.3f} Mbit/s per unit of mix.</p>")
        except InputError as err:
            text = f"<p>No fit: {html.escape(str(err))}.</p>"
        one = usable[usable["senders"] == 1]["goodput_bit_s"].mean()
        twenty = usable[usable["senders"] == usable["senders"].max()]["goodput_bit_s"].mean()
        if np.isfinite(one) and np.isfinite(twenty) and one > 0 and usable["senders"].max() > 1:
            text += (f"<p>Goodput with {int(usable['senders'].max())} senders is {100 * twenty / one:.1f} % of "
                     f"goodput with one (paper, 20 against 1: "
                     f"{100 * self.reference['goodput_vs_mix']['goodput_20_senders_share_of_1_sender']:.1f} %).</p>")
        name = self.save(plots.plot_goodput_vs_mix(s[s["senders"] > 0], fit,
                                                   self.reference["goodput_vs_mix"]["pearson_r"]), "goodput_vs_mix")
        self.sections.append(Section("Goodput against the process mix (paper figure 5)", text, [name]))

    def fairness(self) -> None:
        s = self.summary
        if "jain" not in s or s["jain"].notna().sum() == 0:
            return
        today = s.pivot_table(index="background", columns="senders", values="jain", aggfunc="mean")
        ref = self.reference["fairness_table3"]
        paper = pd.DataFrame(ref["jain"], index=pd.Index(ref["background"], name="background"),
                             columns=pd.Index(ref["senders"], name="senders"))
        common = pd.merge(today.stack().rename("today").reset_index(), paper.stack().rename("paper").reset_index(),
                          on=["background", "senders"]).dropna()
        text = "<p>Jain's fairness index over the window, rows background processes N, columns senders M; " \
               "mean over repetitions.</p>"
        text += "<h3>Today</h3>" + _table_html(today.reset_index().rename(columns={"background": "N \\ M"}),
                                              float_format="{:.4f}")
        text += "<h3>Paper, table 3</h3>" + _table_html(paper.reset_index().rename(columns={"background": "N \\ M"}),
                                                       float_format="{:.4f}")
        if len(common) >= 3 and common["today"].std() > 0:
            r = float(np.corrcoef(common["today"], common["paper"])[0, 1])
            text += f"<p>Over the {len(common)} grid points both have: Pearson r = <b>{r:.2f}</b>.</p>"
        else:
            text += f"<p>{len(common)} grid point(s) in common with the paper's table: too few for a correlation.</p>"
        name = self.save(plots.plot_jain_heatmap(today, "Jain's index (today)"), "jain_heatmap")
        self.sections.append(Section("Fairness (paper table 3)", text, [name]))

    def intervals(self) -> None:
        hists = self.per_point_tables("intervals_hist")
        if not hists:
            return
        ref = self.reference["single_sender_frame_intervals"]
        text = ("<p>Frame intervals per stream on the wire, write intervals per sending process.</p>"
                f"<p>Paper, one sender and no background: minimum {ref['min_ms']} ms, median {ref['median_ms']} ms "
                f"(its frame time at 10 Mbit/s: about 1.2 ms of wire, the rest the sender's CPU), "
                f"gaps of about {ref['long_gap_ms']} ms {ref['long_gaps_per_s']} times a second.")
        single = self.summary[(self.summary["senders"] == 1) & (self.summary["background"] == 0)]
        if len(single) and "frame_gap_p50_ns" in single:
            text += (f" Today: median {single['frame_gap_p50_ns'].mean() / 1e6:.3f} ms, 99th percentile "
                     f"{single['frame_gap_p99_ns'].mean() / 1e6:.3f} ms, longest "
                     f"{single['frame_gap_max_ns'].max() / 1e6:.3f} ms.")
        text += "</p>"
        name = self.save(plots.plot_interval_distributions(hists), "intervals")
        self.sections.append(Section("Frame and write intervals (paper figure 3)", text, [name]))

    def idc(self) -> None:
        tables = self.per_point_tables("idc")
        if not tables:
            return
        name = self.save(plots.plot_idc_curves(tables), "idc")
        self.sections.append(Section(
            "Index of dispersion for counts (paper figure 4)",
            "<p>IDC(t) = Var(N_t)/E(N_t) of the frames of all streams. The paper saw IDC rise with t for one "
            "sender (self-similar looking) and flatten as processes were added.</p>", [name]))

    def contracts(self) -> None:
        tables = self.per_point_tables("contract")
        if not tables:
            return
        name = self.save(plots.plot_contract_curves(tables), "contracts")
        self.sections.append(Section(
            "Zero-loss traffic contracts",
            "<p>The smallest maximum burst size (cells) that lets every cell conform, against the sustainable "
            "cell rate, averaged over the streams (frames cut into ATM cells at the link rate).</p>", [name]))

    def gap_causes(self) -> None:
        """The timeline's explanation of the long gaps (hostwire gaps), per grid point: each cause's
        share of the gap time, weighted by each run's gap time; the runs whose sources cannot tell
        some causes apart say which."""
        from hostwire.timeline.gaps import CAUSES

        s = self.summary
        columns = [f"gap_{c}_share" for c in CAUSES]
        if "gap_time_ns" not in s or not set(columns) <= set(s.columns):
            return
        have = s[(s["gap_time_ns"].fillna(0) > 0) & (s["senders"] > 0)]
        if len(have) == 0:
            return
        time_per_cause = have[columns].mul(have["gap_time_ns"], axis=0).assign(
            senders=have["senders"], background=have["background"], gap_time_ns=have["gap_time_ns"],
            gaps=have["gaps"])
        per_point = time_per_cause.groupby(["senders", "background"]).sum()
        shares = per_point[columns].div(per_point["gap_time_ns"], axis=0)
        shares.columns = list(CAUSES)
        table = shares.reset_index()
        table.insert(2, "gaps", per_point["gaps"].astype(int).to_numpy())
        table.insert(3, "gap_s", per_point["gap_time_ns"].to_numpy() / 1e9)
        text = ("<p>Every gap between two data frames of a stream longer than twice the frame's time on the wire, "
                "split by the joined timeline (scheduler, system calls or the senders' logs, capture) into causes "
                "that add up to the gap; per grid point, each cause's share of the gap time "
                "(<code>hostwire gaps RUN --summary</code> for one run, docs/timeline.md for the rules). "
                "The paper explained its long gaps by eye in figure 2: the sender was not running.</p>")
        cannot = sorted({c for c in have.get("gap_cannot_tell", pd.Series(dtype=str)).fillna("") if c})
        if cannot:
            text += "<p>" + " ".join(html.escape(c) for c in cannot) + "</p>"
        name = self.save(plots.plot_gap_causes(shares), "gap_causes")
        self.sections.append(Section("Why the long gaps happen", text + _table_html(table, float_format="{:.3f}"),
                                     [name]))

    def accuracy(self) -> None:
        """The MSHN method over a campaign that varies the collector set: per set, each metric's
        mean paired difference from the bare runs (same grid point and repetition) with its 95 %
        interval, and the verdict (hostwire.overhead.compare_sets)."""
        from hostwire.overhead import ACCURACY_METRICS, compare_sets

        s = self.summary
        if "collectors" not in s or s["collectors"].nunique() < 2:
            return
        names = list(dict.fromkeys(s["collectors"].astype(str)))
        baseline = "none" if "none" in names else names[0]
        pair_keys = [c for c in ("senders", "background", "link_rate", "sender_cpu_share", "repetition") if c in s]
        rows: dict[str, list[dict[str, float]]] = {}
        for name in names:
            part = s[s["collectors"].astype(str) == name].sort_values(pair_keys, kind="stable")
            rows[name] = [{m: float(r[m]) if m in part and pd.notna(r[m]) else float("nan") for m in ACCURACY_METRICS}
                          for _, r in part.iterrows()]
            if "goodput_app_bit_s" in part:  # the receivers' figure: the same with and without a capture
                for row, value in zip(rows[name], part["goodput_app_bit_s"]):
                    row["goodput_bit_s"] = float(value)
        if len({len(v) for v in rows.values()}) != 1:
            self.sections.append(Section("Does a collector change the answer?",
                                         "<p>Not compared: the collector sets have different numbers of runs.</p>"))
            return
        table = pd.DataFrame(compare_sets(rows, baseline))
        table = table[table["low"].notna()] if "low" in table else table
        text = (f"<p>Each collector set against <code>{html.escape(baseline)}</code>, run for run (same grid point "
                "and repetition): mean difference and its 95 % interval; a set changes the answer when an interval "
                "excludes zero (the MSHN method).</p>")
        self.sections.append(Section("Does a collector change the answer?", text + _table_html(table)))

    def process_trace(self) -> None:
        try:
            figure, caption = self._process_trace_figure()
        except (HostwireError, KeyError, ValueError) as err:
            self.sections.append(Section("Process trace (paper figure 2)",
                                         f"<p>Not drawn: {html.escape(str(err))}</p>"))
            return
        if figure is None:
            return
        name = self.save(figure, "process_trace")
        self.sections.append(Section("Process trace (paper figure 2)", caption, [name]))

    def _process_trace_figure(self) -> tuple[Any, str]:
        from hostwire.metrics.streams import data_frames, label_streams
        from hostwire.run import load_run

        s = self.summary[(self.summary["senders"] > 0) & (self.summary["status"] == "complete")]
        if len(s) == 0:
            return None, ""
        preferred = s[(s["senders"] == 2) & (s["background"] == 2)]
        row = (preferred if len(preferred) else s.sort_values(["senders", "background"])).iloc[-1]
        run = load_run(self.campaign / str(row["directory"]))
        start, end = run.window_ns()
        frames = data_frames(label_streams(run.df_frames()))
        frames = frames[(frames["t_ns"] >= start) & (frames["t_ns"] <= end)]
        if len(frames) < 2:
            return None, ""
        t = frames["t_ns"].to_numpy(np.int64)
        codes = frames["stream"].cat.codes.to_numpy()
        order = np.lexsort((t, codes))
        gaps = np.where(codes[order][1:] == codes[order][:-1], np.diff(t[order]), 0)
        k = int(np.argmax(gaps))
        t0 = int(t[order][k])
        lo, hi = t0 - TRACE_SPAN_NS // 3, t0 + 2 * TRACE_SPAN_NS // 3
        near = frames[(frames["t_ns"] >= lo) & (frames["t_ns"] <= hi)]
        writes = run.df_writes()
        writes = writes[(writes["t_ns"] >= lo) & (writes["t_ns"] <= hi)]
        running = self._running(run, lo, hi)
        title = f"M={int(row['senders'])} N={int(row['background'])}: longest off period {gaps[k] / 1e6:.1f} ms"
        caption = (f"<p>Run {html.escape(str(row['run_id']))}: data frames (bars) and writes (dots) around the "
                   f"longest gap between two frames of one stream ({gaps[k] / 1e6:.1f} ms)"
                   + ("; the step line is the process running on the sender's CPU" if running is not None else
                      "; the kernel was not traced in this run, so which process ran is not shown")
                   + f". Paper: off periods of about {self.reference['process_trace_figure2']['off_period_s']} s, "
                   f"then about {self.reference['process_trace_figure2']['fast_writes_in_a_row']} writes "
                   f"{self.reference['process_trace_figure2']['fast_write_interval_ms']} ms apart.</p>")
        return plots.plot_process_trace(near, writes, running, t0, title), caption

    def _running(self, run: Any, lo: int, hi: int) -> pd.DataFrame | None:
        path = run.path / "raw" / "sched.tsv"
        if not path.exists():
            return None
        from hostwire.sched import read_sched_tsv
        from hostwire.topology import parse_cpu_list

        _, df = read_sched_tsv(path, columns=["next_pid"])
        cpus = parse_cpu_list(str(run.manifest.get("point", {}).get("sender_cpus", "0")))
        df = df[(df["event"] == "sched_switch") & df["cpu"].isin(cpus) & (df["t_ns"] >= lo) & (df["t_ns"] <= hi)]
        roles = {int(p["pid"]): str(p["role"]) for p in run.bench.processes() if "pid" in p and "role" in p}
        pid = df["next_pid"].astype("int64")
        role = pid.map(roles).where(pid != 0, "idle").fillna("other")
        return pd.DataFrame({"t_ns": df["t_ns"].astype("int64").to_numpy(), "role": role.to_numpy()})

    def _campaign_json(self) -> dict[str, Any]:
        try:
            return json.loads((self.campaign / "campaign.json").read_text())
        except (OSError, ValueError):
            return {}

    def build(self) -> Path:
        steps = (self.overview, self.goodput, self.fairness, self.intervals, self.idc, self.contracts,
                 self.process_trace, self.gap_causes, self.accuracy, self.sanity)
        for step in steps:
            step()
        return self.write()

    def write(self) -> Path:
        book = self._campaign_json()
        name = html.escape(str(book.get("name", self.campaign.name)))
        parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>hostwire: {name}</title>",
                 f"<style>{CSS}</style></head><body>",
                 f"<h1>hostwire campaign {name}</h1>",
                 f"<p class=\"small\">Made {time.strftime('%Y-%m-%d %H:%M')} from {html.escape(str(self.campaign))}. "
                 f"Paper figures: {html.escape(self.reference['source'])}.</p>"]
        for section in self.sections:
            parts.append(f"<section><h2>{html.escape(section.title)}</h2>{section.body}")
            for fig in section.figures:
                parts.append(f'<figure><a href="plots/{fig}.svg"><img src="plots/{fig}.png" alt="{fig}"></a></figure>')
            parts.append("</section>")
        parts.append("</body></html>")
        out = self.campaign / "report.html"
        tmp = out.with_name(".report.html.tmp")
        try:
            tmp.write_text("\n".join(parts), encoding="utf-8")
            tmp.replace(out)
        except OSError as err:
            raise HostwireError(f"failed to write {out}: {err.strerror or err}") from None
        return out


CSS = """
body { font-family: sans-serif; max-width: 1100px; margin: 2em auto; color: #222; }
table { border-collapse: collapse; font-size: 0.8em; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: right; }
tr.bad td { background: #fdd; }
.warn { color: #a00; font-weight: bold; }
.small { font-size: 0.8em; color: #666; }
img { max-width: 100%; }
"""


def build_report(campaign: str | Path) -> Path:
    return ReportBuilder(Path(campaign)).build()


def digest_lines(campaign: str | Path) -> list[str]:
    """One line per run (point, status, goodput on the wire, Jain's index, what marked it) and the
    goodput fit against the mix, for a terminal."""
    summary = pd.read_parquet(Path(campaign) / "summary.parquet")
    lines = [f"{'run':28s} {'M':>3s} {'N':>3s} {'status':9s} {'goodput':>13s} {'jain':>7s}  marked"]
    for row in summary.itertuples():
        goodput = getattr(row, "goodput_bit_s", float("nan"))
        jain = getattr(row, "jain", float("nan"))
        marked = int(getattr(row, "marked", 1) if pd.notna(getattr(row, "marked", 1)) else 1)
        lines.append(f"{row.run_id:28s} {row.senders:3d} {row.background:3d} {row.status:9s} "
                     f"{goodput / 1e6:8.2f} Mb/s {jain:7.4f}  {'yes' if marked else 'no'}")
    usable = summary[summary["senders"] > 0].dropna(subset=["goodput_bit_s"]) if "goodput_bit_s" in summary else summary[:0]
    try:
        fit = goodput_against_mix(usable["senders"].to_numpy(), usable["background"].to_numpy(),
                                  usable["goodput_bit_s"].to_numpy())
        lines.append(f"goodput against M/(M+N): Pearson r {fit['pearson_r']:.2f} over {fit['runs']} runs "
                     f"(paper {load_reference()['goodput_vs_mix']['pearson_r']})")
    except InputError as err:
        lines.append(f"goodput against M/(M+N): no fit ({err})")
    return lines
