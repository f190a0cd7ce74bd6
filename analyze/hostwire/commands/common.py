"""What several commands share: the time range, durations and link rates on the command line,
options declared by the library (hostwire.metrics.options), and tables written as CSV or JSON."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from hostwire.errors import UsageError
from hostwire.linkrate import LinkRate, given_rate
from hostwire.units import parse_duration_ns
from hostwire.window import offset_problem


def duration(text: str) -> int:
    """argparse's type for a duration: nanoseconds (hostwire.units.parse_duration_ns)."""
    try:
        return parse_duration_ns(text)
    except UsageError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def link_rate(text: str) -> LinkRate:
    """argparse's type for --link-rate: the rate, parsed here once (hostwire.linkrate.given_rate)
    and handed on as a LinkRate to every rule that uses it."""
    try:
        return given_rate(text)
    except UsageError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def seconds(text: str) -> float:
    """argparse's type for --from/--to: a finite number of seconds, 0 or more (never nan or inf)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number of seconds") from None
    why = offset_problem(value)
    if why is not None:
        raise argparse.ArgumentTypeError(f"{text!r}: {why}")
    return value


def add_time_range(p: argparse.ArgumentParser, origin: str) -> None:
    """--from/--to SEC (from_s, to_s): a part of the window, in seconds after `origin`."""
    p.add_argument("--from", dest="from_s", type=seconds, metavar="SEC", help=f"start, seconds after {origin}")
    p.add_argument("--to", dest="to_s", type=seconds, metavar="SEC", help="end, seconds after the same origin")


def add_options(p: argparse.ArgumentParser, options: Iterable[Any]) -> None:
    """Adds options declared as hostwire.metrics.options.Option."""
    for o in options:
        if o.kind == "flag":
            p.add_argument(o.flag, dest=o.dest, action="store_true", help=o.help)
        elif o.kind == "append":
            p.add_argument(o.flag, dest=o.dest, action="append", metavar=o.metavar, help=o.help)
        else:
            kind = {"duration": duration, "link_rate": link_rate}.get(o.kind, o.kind)
            kind = seconds if o.dest in ("from_s", "to_s") else kind
            p.add_argument(o.flag, dest=o.dest, type=kind,
                           default=o.default, metavar=o.metavar, choices=o.choices, help=o.help)


def write_table(table: pd.DataFrame, as_json: bool, out: Any) -> None:
    """CSV (floats with 10 significant digits), or JSON records with NaN and infinities as null."""
    if as_json:
        records = [{k: _json_value(v) for k, v in row.items()} for row in table.to_dict(orient="records")]
        json.dump(records, out, indent=1)
        out.write("\n")
    else:
        table.to_csv(out, index=False, float_format="%.10g")


def write_pieces(pieces: Iterable[pd.DataFrame], columns: list[str], as_json: bool, out: Any) -> None:
    """write_table of the pieces' rows one after the other, one piece held at a time (a long
    run's table need not fit in memory): the same text as write_table of their concatenation
    (columns: the header of a table without rows)."""
    first = True
    if as_json:
        for piece in pieces:
            for row in piece.to_dict(orient="records"):
                text = json.dumps({k: _json_value(v) for k, v in row.items()}, indent=1)
                out.write(("[\n " if first else ",\n ") + text.replace("\n", "\n "))
                first = False
        out.write("[]\n" if first else "\n]\n")
        return
    for piece in pieces:
        piece.to_csv(out, index=False, header=first, float_format="%.10g")
        first = False
    if first:
        pd.DataFrame(columns=columns).to_csv(out, index=False)


def _json_value(v: Any) -> Any:
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating, float)):
        f = float(v)
        return f if math.isfinite(f) else None
    if isinstance(v, np.bool_):
        return bool(v)
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return v
