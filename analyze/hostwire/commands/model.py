"""hostwire model CAMPAIGN: each grid point's goodput, Jain's index and CPU wait as the layered
model predicts them (docs/model.md), beside the measured runs, with model.parquet/model.csv."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

EPILOG = """examples:
  hostwire model runs/paper-regime                       calibrate on this host, predict, compare
  hostwire model runs/paper --calibration runs/cal       take the calibration from a campaign
  hostwire model runs/paper-regime --predict senders=40,background=5,link_rate=1gbit

The model's inputs are measured by short calibration runs of its own (M_c senders with 0, N_1 and
N_2 sieves for each set-up of the campaign; none of them a point it predicts), recorded into
CAMPAIGN/model-calibration unless --calibration names a calibration campaign (analysed, or only
recorded: then it reads goodput and the limit of each run without the joined timeline and writes
DIR/calibration.parquet); an existing one is reused and completed. Needs CAMPAIGN analysed (hostwire analyze). Writes
CAMPAIGN/model.parquet and model.csv, one row per run: the grid parameters, goodput_mbps and
goodput_model_mbps, goodput_error_pct, jain and jain_model, jain_error_pct, the senders' CPU
wait measured and modelled, the modelled regime and why.

--predict KEY=VALUE,... gives the model's figures for a point that was not run (senders,
background, and the set-up's sender_cpu_share, link_rate, link_qdisc, link_queue over the
campaign's): a prediction, not a measurement.

exit status: 0 done, 1 missing or unreadable input or a failed calibration, 2 a bad option."""

PREDICT_KEYS = {"senders": int, "background": int, "sender_cpu_share": float, "link_rate": str,
                "link_qdisc": str, "link_queue": int}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "model", help="predict goodput, fairness and CPU wait from the process mix; compare with the runs",
        description="A layered queueing model of the sender host (its CPU under the scheduler's share and "
        "the quota, the wire, TCP's windows), solved by Mean Value Analysis from measured inputs, checked "
        "against every run of an analysed campaign.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("campaign", metavar="CAMPAIGN", type=Path, help="campaign directory (analysed)")
    parser.add_argument("--calibration", metavar="DIR", type=Path, action="append",
                        help="an analysed calibration campaign (default: record CAMPAIGN/model-calibration); "
                        "repeatable: the campaigns' runs together")
    parser.add_argument("--calibration-window", metavar="SEC", type=float, default=10.0,
                        help="logging window of each calibration run it records (default 10; 2 s warm-up)")
    parser.add_argument("--predict", metavar="KEY=VALUE,...", action="append", default=[],
                        help="a point that was not run: senders=40,background=5,link_rate=1gbit; repeatable")
    parser.add_argument("--points", action="store_true", help="also print one line per run")
    parser.add_argument("--windows", action="store_true",
                        help="also each run's streams' congestion windows and bytes in flight (kernel tcp_probe): "
                        "Jain's index of each and their correlation with goodput (columns jain_cwnd, "
                        "jain_inflight, r_inflight_bytes)")
    parser.set_defaults(func=run)


def parse_predict(text: str) -> dict[str, object]:
    from hostwire.errors import UsageError

    values: dict[str, object] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or key not in PREDICT_KEYS:
            raise UsageError(f"--predict {text!r}: {item!r}: expected KEY=VALUE with KEY one of "
                             + ", ".join(PREDICT_KEYS))
        try:
            values[key] = PREDICT_KEYS[key](value)
        except ValueError:
            raise UsageError(f"--predict {text!r}: {key}={value!r}: expected {PREDICT_KEYS[key].__name__}") from None
    if "senders" not in values:
        raise UsageError(f"--predict {text!r}: senders=M is required")
    if int(values["senders"]) < 1 or int(values.get("background", 0)) < 0:  # type: ignore[call-overload]
        raise UsageError(f"--predict {text!r}: expected senders >= 1 and background >= 0")
    if "link_rate" in values:
        from hostwire.units import parse_rate

        try:
            parse_rate(str(values["link_rate"]))
        except Exception as err:  # noqa: BLE001 - parse_rate's own message names the problem
            raise UsageError(f"--predict {text!r}: {err}") from None
    return values


def run(args: argparse.Namespace) -> int:
    from hostwire.campaign.calibrate import record_calibration
    from hostwire.model.campaign_model import model_campaign

    from hostwire.errors import UsageError

    if not 0.5 <= args.calibration_window <= 600:
        raise UsageError(f"--calibration-window {args.calibration_window:g}: expected 0.5 to 600 seconds")
    wanted = [parse_predict(text) for text in args.predict]
    from hostwire.campaign.calibrate import LIGHT_SUMMARY, light_summary

    for directory in args.calibration or []:
        if not (directory / "summary.parquet").exists() and not (directory / LIGHT_SUMMARY).exists() \
                and (directory / "campaign.json").exists():
            light_summary(directory)  # recorded, not analysed: read what the model needs
    result = model_campaign(args.campaign, calibration_dir=args.calibration, predict=wanted, windows=args.windows,
                            record=record_calibration, calibration_window_s=args.calibration_window)
    out = sys.stdout
    out.write("calibration:\n" + "".join(f"  {line}\n" for line in result.calibration_lines))
    if args.points:
        out.write("".join(f"{line}\n" for line in result.point_lines))
    out.write("".join(f"{line}\n" for line in result.summary_lines))
    for line in result.prediction_lines:
        out.write(line + "\n")
    out.write(f"{result.table_path}\n")
    logging.getLogger("hostwire").debug("model done")
    return 0
