"""`hostwire report CAMPAIGN`: report.html and plots/ (PNG and SVG) from an analysed campaign
(summary.parquet and each run's tables/), with the 1997 paper's figures beside today's where the
paper gave a number (hostwire/data/paper1997.json)."""

from __future__ import annotations

import html
import json
import logging
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hostwire.campaign import tables
from hostwire.report import plots
from hostwire.report.html_table import table_html
from hostwire.report.page import Section, save_figure, write_page
from hostwire.errors import HostwireError, InputError
from hostwire.metrics.regime import WHY_WIRE_CANNOT_DEPEND, df_goodput_fit_by_limit
from hostwire.timeline.gaps import CAUSES

log = logging.getLogger(__name__)

REFERENCE = Path(__file__).parents[1] / "data" / "paper1997.json"


def load_reference() -> dict[str, Any]:
    from hostwire.versioned import read_json

    return read_json(REFERENCE, "hostwire-reference", 1)


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

    def setups(self) -> list[str]:
        """The campaign's setups in the summary's order (one figure each where points are pooled)."""
        return list(dict.fromkeys(tables.setups(self.summary)))

    def per_setup_figures(self, table: str, draw: Any, name: str) -> tuple[list[str], str]:
        """One figure of `table`'s per-point tables for each setup (`draw` makes it), named name,
        name_2, ...; and a caption line naming the setup of each when there are several."""
        names, captions = [], []
        for setup in self.setups():
            tables = self.per_point_tables(table, setup)
            if not tables:
                continue
            figure = draw(tables)
            if len(self.setups()) > 1:
                figure.suptitle(setup, fontsize=10)
            names.append(self.save(figure, name if not names else f"{name}_{len(names) + 1}"))
            captions.append(f"figure {len(names)}: {html.escape(setup)}")
        return names, (f"<p>One figure per setup: {'; '.join(captions)}.</p>" if len(names) > 1 else "")

    def save(self, fig: Any, name: str) -> str:
        return save_figure(fig, self.plots, name)

    def per_point_tables(self, table: str, setup: str | None = None) -> dict[tuple[int, int], pd.DataFrame]:
        """Each run's tables/<table>.parquet, concatenated per grid point (M, N), with a column
        `run` (the run's id) added; runs without the table or with an empty one left out. With
        `setup`, only that setup's runs (points of different setups are not pooled)."""
        out: dict[tuple[int, int], list[pd.DataFrame]] = {}
        runs = self.summary if setup is None else self.summary[tables.setups(self.summary) == setup]
        for row in runs.itertuples():
            path = self.campaign / str(row.directory) / "tables" / f"{table}.parquet"
            if not path.exists():
                continue
            df = self._read_table(path)
            if len(df):
                out.setdefault((int(row.senders), int(row.background)), []).append(df.assign(run=str(row.run_id)))
        return {k: pd.concat(v, ignore_index=True) for k, v in out.items()}

    def _read_table(self, path: Path) -> pd.DataFrame:
        """A run's cached table; one that does not read back (a 0-byte file, a copy cut short) is
        recomputed by hostwire.campaign.analyze, with a warning naming it."""
        try:
            return pd.read_parquet(path)
        except Exception as err:  # noqa: BLE001 - whatever Parquet says of a damaged file
            log.warning("%s: damaged cache (%s); recomputed", path, str(err).splitlines()[0] if str(err) else err)
        from hostwire.campaign.analyze import analyze_run

        analyze_run(path.parent.parent, force=True)
        try:
            return pd.read_parquet(path)
        except Exception as err:  # noqa: BLE001
            raise InputError(f"{path}: cannot read after recomputing: {err}") from None

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
            + table_html(table, classes)))

    def goodput(self) -> None:
        """Goodput against the mix, fitted in each regime (the measured `limit`), the paper's r set
        beside the CPU-limited fit only, and the paper's 20-against-1 figure beside today's at the
        same N = 0 within one setup."""
        s = self.summary
        if "goodput_bit_s" not in s or s["goodput_bit_s"].notna().sum() == 0:
            return
        paper = self.reference["goodput_vs_mix"]
        fits = df_goodput_fit_by_limit(s)
        text = ("<p>Goodput on the wire against the share of sending processes M/(M+N), fitted separately in "
                "each regime: what limited each run is measured (<code>limit</code> in summary.parquet; "
                "docs/metrics.md, \"What limited a run\"), never taken from the config. "
                f"{html.escape(WHY_WIRE_CANNOT_DEPEND)}</p>")
        if len(fits):
            text += table_html(fits, float_format="{:.3f}")
        cpu = fits[fits["limit"] == "cpu"]
        cpu_fit = None
        if len(cpu) and np.isfinite(cpu["pearson_r"].iloc[0]):
            row = cpu.iloc[0]
            cpu_fit = {"pearson_r": float(row["pearson_r"]), "slope_bit_s": float(row["slope_mbit_s"]) * 1e6,
                       "intercept_bit_s": float(row["intercept_mbit_s"]) * 1e6, "runs": int(row["runs"])}
            text += (f"<p>Where the sender host's CPU limited ({int(row['runs'])} runs, {int(row['mixes'])} mixes): "
                     f"Pearson r = <b>{row['pearson_r']:.2f}</b>; the paper, whose sender's CPU limited too, "
                     f"found r = {paper['pearson_r']}.</p>")
        else:
            text += (f"<p>No run was limited by the sender's CPU in enough mixes to fit, so nothing here "
                     f"compares with the paper's r = {paper['pearson_r']}, which was measured where the CPU "
                     "limited.</p>")
        text += self._twenty_against_one(paper["goodput_20_senders_share_of_1_sender"])
        name = self.save(plots.plot_goodput_vs_mix(s[s["senders"] > 0], cpu_fit, paper["pearson_r"]), "goodput_vs_mix")
        self.sections.append(Section("Goodput against the process mix (paper figure 5)", text, [name]))

    def repetitions(self) -> None:
        """Each repeated grid point's n, mean, standard deviation and 95 % interval of goodput and
        Jain's index (campaign.repetitions), as summary.parquet holds them."""
        points = tables.df_point_intervals(self.summary)
        if points.empty:
            return
        half = points["goodput_ci95_half_pct"]
        text = (f"<p>{len(points)} grid points recorded {int(points['n'].min())} to {int(points['n'].max())} "
                "times: the mean of each, its standard deviation and its 95 % confidence interval (Student's t "
                "with n - 1 degrees of freedom), drawn as the black bars in the goodput figure above. The goodput "
                f"intervals' half-widths are {half.min():.1f} to {half.max():.1f} % of their means (median "
                f"{half.median():.1f} %); <code>hostwire run --until-ci 5%</code> repeats the wider points.</p>")
        self.sections.append(Section("Repetitions: each point's mean and its interval",
                                     text + table_html(points, float_format="{:.3f}")))

    def _twenty_against_one(self, paper_share: float) -> str:
        """The paper's figure: goodput with 20 senders and no background process as a share of
        goodput with one, both at N = 0 and in one setup; where the grid lacks those points, says so."""
        shares = tables.df_twenty_against_one(self.summary)
        if len(shares):
            parts = "; ".join(f"{html.escape(row.setup)}: {100 * row.share:.1f} %" for row in shares.itertuples())
            return (f"<p>Goodput with 20 senders as a share of goodput with one, both with no background process "
                    f"(N = 0), per setup: {parts} (paper, the same points: {100 * paper_share:.1f} %).</p>")
        return (f"<p>The paper's figure, goodput with 20 senders at {100 * paper_share:.1f} % of goodput with one "
                "(both with no background process), is not compared: this grid lacks M = 1 or M = 20 at N = 0.</p>")

    def fairness(self) -> None:
        """Table 3 of the paper beside today's, one table per setup (runs compare like for like only
        within one), each correlated with the paper over the grid points both have."""
        s = self.summary
        if "jain" not in s or s["jain"].notna().sum() == 0:
            return
        ref = self.reference["fairness_table3"]
        paper = pd.DataFrame(ref["jain"], index=pd.Index(ref["background"], name="background"),
                             columns=pd.Index(ref["senders"], name="senders"))
        text = ("<p>Jain's fairness index over the window, rows background processes N, columns senders M; "
                f"mean over repetitions, one table per setup. The paper's: {html.escape(self.reference['setup'])}; "
                "its sender's CPU limited.</p>")
        figures = []
        for k, jain in enumerate(tables.jain_tables(s, paper)):
            window = ", ".join(f"{w:g} s" for w in jain.windows_s) or "?"
            limits = ", ".join(f"{n} {lim}" for lim, n in jain.limits.items()) or "not measured"
            text += (f"<h3>Today: {html.escape(jain.setup)}</h3><p>Window {window}; what limited the runs: "
                     f"{html.escape(limits)}.</p>")
            text += table_html(jain.table.reset_index().rename(columns={"background": "N \\ M"}),
                                float_format="{:.4f}")
            if np.isfinite(jain.pearson_r):
                text += (f"<p>Over the {jain.common_points} grid points this setup shares with the paper's table: "
                         f"Pearson r = <b>{jain.pearson_r:.2f}</b>, mean difference today - paper "
                         f"{jain.mean_difference:+.4f}.</p>")
            else:
                text += (f"<p>{jain.common_points} grid point(s) in common with the paper's table: too few for a "
                         "correlation.</p>")
            figures.append(self.save(plots.plot_jain_heatmap(jain.table, f"Jain's index: {jain.setup}"),
                                     "jain_heatmap" if k == 0 else f"jain_heatmap_{k + 1}"))
        text += "<h3>Paper, table 3</h3>" + table_html(paper.reset_index().rename(columns={"background": "N \\ M"}),
                                                       float_format="{:.4f}")
        self.sections.append(Section("Fairness (paper table 3)", text, figures))

    def intervals(self) -> None:
        """Figure 3: the tails of the frame and write intervals (plots.plot_interval_distributions),
        with the paper's one-sender figures beside today's."""
        hists = self.per_point_tables("intervals_hist")
        if not hists:
            return
        ref = self.reference["single_sender_frame_intervals"]
        chosen, longest = plots.interval_highlights(self.per_point_tables("intervals_hist", self.setups()[0]))
        named = ", ".join(f"M={m} N={n}" for m, n in chosen)
        text = ("<p>The share of intervals longer than x, on log-log axes so that the long gaps show: left, the "
                "intervals between data frames on the link (all streams merged); right, the intervals between "
                "one sending process's writes (every process's pooled); the runs of a grid point pooled. "
                f"Coloured: {html.escape(named)}"
                + (f" (M={longest[0]} N={longest[1]}: the longest frame interval)" if longest else "")
                + (f"; grey: the other {len(hists) - len(chosen)} grid points" if len(hists) > len(chosen) else "")
                + ".</p>"
                f"<p>Paper, one sender and no background: minimum {ref['min_ms']} ms, median {ref['median_ms']} ms "
                f"(its frame time at 10 Mbit/s: about 1.2 ms of wire, the rest the sender's CPU), "
                f"gaps of about {ref['long_gap_ms']} ms {ref['long_gaps_per_s']} times a second.")
        text += "</p>" + self._one_sender_intervals()
        names, caption = self.per_setup_figures("intervals_hist", plots.plot_interval_distributions, "intervals")
        self.sections.append(Section("Frame and write intervals (paper figure 3)", text + caption, names))

    def _one_sender_intervals(self) -> str:
        """Today's figures at the paper's point (one sender, no background process), per setup with
        what limited it: the paper's sender was CPU-limited on a 10 Mbit/s link."""
        table = tables.df_one_sender_intervals(self.summary)
        if len(table) == 0:
            return "<p>Not compared: the grid has no run with one sender and no background process.</p>"
        rows = [f"{html.escape(r.setup)} (limited by: {html.escape(r.limit)}): median {r.p50_ms:.3f} ms, "
                f"99th percentile {r.p99_ms:.3f} ms, longest {r.max_ms:.3f} ms" for r in table.itertuples()]
        return ("<p>Today at the same point, one sender and no background process, per setup: "
                + "; ".join(rows) + ". Only a CPU-limited setup on a 10 Mbit/s link is the paper's condition; "
                "on a wire-limited link the median is the frame's time on the wire.</p>")

    def idc(self) -> None:
        self.curves("Index of dispersion for counts (paper figure 4)", "idc", plots.plot_idc_curves, "idc",
                    "<p>IDC(t) = Var(N_t)/E(N_t) of the frames of all streams, one panel per number of background "
                    "processes N, one curve per number of senders M (the mean over the runs of the point); the "
                    "dashed line is a Poisson stream's IDC of 1. The paper saw IDC rise with t for one sender "
                    "(self-similar looking) and flatten as processes were added.</p>")

    def contracts(self) -> None:
        self.curves("Zero-loss traffic contracts", "contract", plots.plot_contract_curves, "contracts",
                    "<p>The smallest maximum burst size (cells) that lets every cell conform, against the "
                    "sustainable cell rate, averaged over the streams (frames cut into ATM cells at the link "
                    "rate); one panel per number of background processes N, a colour per number of senders M, a "
                    "line per run (each run's SCRs start at its own smallest mean cell rate). A dot is a run whose "
                    "mean rate is the peak rate: no SCR below it exists.</p>")

    def curves(self, title: str, table: str, draw: Any, name: str, text: str) -> None:
        """A section of one figure per setup of the runs' `table` (left out when no run has it)."""
        names, caption = self.per_setup_figures(table, draw, name)
        if names:
            self.sections.append(Section(title, text + caption, names))

    def gap_causes(self) -> None:
        """The timeline's explanation of the long gaps (hostwire gaps), per grid point and setup:
        each cause's share of the gap time (campaign.tables.df_gap_cause_shares); the runs whose
        sources cannot tell some causes apart say which."""
        table = tables.df_gap_cause_shares(self.summary)
        if len(table) == 0:
            return
        text = ("<p>Every gap between two data frames of a stream longer than twice the frame's time on the wire, "
                "split by the joined timeline (scheduler, system calls or the senders' logs, capture) into causes "
                "that add up to the gap; per grid point and setup, each cause's share of the gap time "
                "(<code>hostwire gaps RUN --summary</code> for one run, docs/timeline.md for the rules). "
                "The paper explained its long gaps by eye in figure 2: the sender was not running.</p>")
        cannot = sorted({c for c in self.summary.get("gap_cannot_tell", pd.Series(dtype=str)).fillna("") if c})
        if cannot:
            text += "<p>" + " ".join(html.escape(c) for c in cannot) + "</p>"
        names = []
        several = table["setup"].nunique() > 1
        for setup, part in table.groupby("setup", sort=False):
            figure = plots.plot_gap_causes(part.set_index(["senders", "background"])[list(CAUSES)])
            if several:
                figure.suptitle(setup, fontsize=10)
            names.append(self.save(figure, "gap_causes" if not names else f"gap_causes_{len(names) + 1}"))
        self.sections.append(Section("Why the long gaps happen", text + table_html(table, float_format="{:.3f}"),
                                     names))

    def accuracy(self) -> None:
        """The MSHN method over a campaign that varies the collector set
        (campaign.tables.df_collector_accuracy)."""
        found = tables.df_collector_accuracy(self.summary)
        if found is None:
            return
        table, baseline = found
        if table.empty:
            self.sections.append(Section("Does a collector change the answer?",
                                         "<p>Not compared: the collector sets have different numbers of runs.</p>"))
            return
        text = (f"<p>Each collector set against <code>{html.escape(baseline)}</code>, run for run (same grid point "
                "and repetition): mean difference and its 95 % interval; a set changes the answer when an interval "
                "excludes zero (the MSHN method).</p>")
        self.sections.append(Section("Does a collector change the answer?", text + table_html(table)))

    def model(self) -> None:
        """Predicted beside measured, from model.parquet (hostwire.model.report_section)."""
        from hostwire.report import model_section as rs

        table = rs.read_model_table(self.campaign)
        text, shown, classes = rs.section_text(table, self.campaign)
        if shown is None or table is None:
            self.sections.append(Section("The model against the runs", text))
            return
        name = self.save(rs.plot_predicted_against_measured(table), "model")
        self.sections.append(Section("The model against the runs", text + table_html(shown, classes), [name]))

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
        from hostwire.run_directory import load_run
        from hostwire.timeline.excerpt import longest_off_period

        s = self.summary[(self.summary["senders"] > 0) & (self.summary["status"] == "complete")]
        if len(s) == 0:
            return None, ""
        preferred = s[(s["senders"] == 2) & (s["background"] == 2)]
        row = (preferred if len(preferred) else s.sort_values(["senders", "background"])).iloc[-1]
        excerpt = longest_off_period(load_run(self.campaign / str(row["directory"])))
        if excerpt is None:
            return None, ""
        gap_ms = excerpt.gap_ns / 1e6
        ref = self.reference["process_trace_figure2"]
        title = f"M={int(row['senders'])} N={int(row['background'])}: longest off period {gap_ms:.1f} ms"
        caption = (f"<p>Run {html.escape(str(row['run_id']))}: data frames (bars) and writes (dots) around the "
                   f"longest gap between two frames of one stream ({gap_ms:.1f} ms)"
                   + ("; the bars below show which process ran on the sender's CPU" if excerpt.running is not None
                      else "; the kernel was not traced in this run, so which process ran is not shown")
                   + f". Paper: off periods of about {ref['off_period_s']} s, then about "
                   f"{ref['fast_writes_in_a_row']} writes {ref['fast_write_interval_ms']} ms apart.</p>")
        return plots.plot_process_trace(excerpt.frames, excerpt.writes, excerpt.running, excerpt.t0_ns, title), caption

    def hosts(self) -> None:
        from hostwire.report.hosts_section import hosts_section

        hosts_section(self, Section)

    def _campaign_json(self) -> dict[str, Any]:
        try:
            return json.loads((self.campaign / "campaign.json").read_text())
        except (OSError, ValueError):
            return {}

    def build(self) -> Path:
        steps = (self.overview, self.goodput, self.repetitions, self.fairness, self.intervals, self.idc, self.contracts,
                 self.process_trace, self.gap_causes, self.model, self.accuracy, self.hosts, self.sanity)
        for step in steps:
            step()
        return self.write()

    def write(self) -> Path:
        book = self._campaign_json()
        name = str(book.get("name", self.campaign.name))
        byline = (f"Made {time.strftime('%Y-%m-%d %H:%M')} from {html.escape(str(self.campaign))}. "
                  f"Paper figures: {html.escape(self.reference['source'])}.")
        return write_page(self.campaign / "report.html", f"hostwire: {name}", f"hostwire campaign {name}", byline,
                          self.sections)


def build_report(campaign: str | Path) -> Path:
    return ReportBuilder(Path(campaign)).build()


def digest_lines(campaign: str | Path) -> list[str]:
    """One line per run (point, status, goodput on the wire, Jain's index, what marked it) and the
    goodput fit against the mix, for a terminal."""
    summary = pd.read_parquet(Path(campaign) / "summary.parquet")
    lines = [f"{'run':28s} {'M':>3s} {'N':>3s} {'status':9s} {'goodput':>13s} {'jain':>7s} {'limit':7s}  marked"]
    for row in summary.itertuples():
        goodput = getattr(row, "goodput_bit_s", float("nan"))
        jain = getattr(row, "jain", float("nan"))
        marked = int(getattr(row, "marked", 1) if pd.notna(getattr(row, "marked", 1)) else 1)
        lines.append(f"{row.run_id:28s} {row.senders:3d} {row.background:3d} {row.status:9s} "
                     f"{goodput / 1e6:8.2f} Mb/s {jain:7.4f} {str(getattr(row, 'limit', '?')):7s}  "
                     f"{'yes' if marked else 'no'}")
    fits = df_goodput_fit_by_limit(summary)
    paper_r = load_reference()["goodput_vs_mix"]["pearson_r"]
    if len(fits) == 0:
        return lines + ["goodput against M/(M+N): no unmarked run with senders and a goodput figure"]
    lines.append("goodput against M/(M+N), per regime (what limited each run, as measured):")
    for row in fits.itertuples():
        fit = (f"r {row.pearson_r:5.2f}, slope {row.slope_mbit_s:8.2f} Mbit/s per unit of mix"
               if np.isfinite(row.pearson_r) else f"no fit ({row.note})")
        fit = f"goodput {row.goodput_mbit_s:7.2f} Mbit/s, spread {row.spread_pct:5.1f} %; " + fit
        paper = f" (paper, where the CPU limited: r {paper_r})" if row.limit == "cpu" else ""
        lines.append(f"  {row.limit:8s} {row.runs:3d} runs, {row.mixes} mixes: {fit}{paper}")
    if (fits["limit"] == "wire").any():
        lines.extend(textwrap.wrap(WHY_WIRE_CANNOT_DEPEND, 100, initial_indent="  ", subsequent_indent="  "))
    return lines
