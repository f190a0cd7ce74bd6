"""Campaign configuration files (configs/*.toml): a grid of run points, checked in full before
anything starts. Every error names the file, the line and the key, and what was expected.

    [campaign]
    name = "quick"            # default: the file's stem
    repetitions = 1           # runs of each grid point
    order = "as-written"      # "shuffled" (with `seed`; the seed used is recorded), or
                              # "alternating": the grid forwards, then backwards (A B, B A, ...)
    seed = 1997

    [defaults]                # any run-point parameter (hostwire.record.runner.RunPoint), one value
    duration_s = 3.0

    [grid]                    # any run-point parameter, a list of values: the cross product
    senders = [1, 2, 5]
    background = [0, 2]

    [variants.capped]         # optional: named sets of run-point parameters over [defaults];
    sender_cpu_share = 0.05   # the grid is recorded once in each, in the order written (a key
    link_qdisc = "none"       # may not be both in a variant and in the grid)
    [variants.shaped]
    link_rate = "10mbit"

    [host]                    # where each run is recorded
    mode = "netns"            # "netns": namespaces on this machine; "vm": each run boots a
                              # fresh QEMU guest (the paper's reboot) and records inside it
    kernel = "stock"          # vm mode: "stock" or "patched" (make kernel builds both)
    vm_timeout_s = 900        # vm mode: a guest still running after this is killed, its run failed

The grid is expanded in the order its keys are written, the last key varying fastest; variants
vary slowest."""

from __future__ import annotations

import difflib
import itertools
import math
import re
import tomllib
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from hostwire.errors import UsageError
from hostwire.record.point import RunPoint

CAMPAIGN_KEYS = {"name": str, "repetitions": int, "order": str, "seed": int}
ORDERS = ("as-written", "shuffled", "alternating")
SECTIONS = ("campaign", "host", "defaults", "grid", "variants")
HOST_KEYS = {"mode": str, "kernel": str, "vm_timeout_s": float}
HOST_MODES = ("netns", "vm")
KERNELS = ("stock", "patched")
POINT_FIELDS = {f.name: f for f in fields(RunPoint)}


@dataclass
class CampaignConfig:
    path: Path
    name: str
    repetitions: int = 1
    order: str = "as-written"
    seed: int = 1997
    defaults: dict[str, Any] = field(default_factory=dict)
    grid: dict[str, list[Any]] = field(default_factory=dict)
    variants: dict[str, dict[str, Any]] = field(default_factory=dict)
    host: dict[str, Any] = field(default_factory=lambda: {"mode": "netns", "kernel": "stock", "vm_timeout_s": 900.0})

    def points(self) -> list[RunPoint]:
        """The grid's points (defaults, then the variant, applied), in the order written, last key
        fastest, each variant in turn."""
        keys = list(self.grid)
        points = []
        for variant in self.variants.values() or [{}]:
            base = replace(RunPoint(), **{**self.defaults, **variant})
            points += [replace(base, **dict(zip(keys, values))) for values in itertools.product(*self.grid.values())]
        return points

    def resolved(self) -> dict[str, Any]:
        """The config with every default filled in, as recorded in campaign.json and manifests."""
        return {
            "campaign": {"name": self.name, "repetitions": self.repetitions, "order": self.order,
                         "seed": self.seed, "file": str(self.path)},
            "host": dict(self.host),
            "defaults": asdict(replace(RunPoint(), **self.defaults)),
            "grid": self.grid,
            "variants": self.variants,
        }


class _Locator:
    """Finds the line of a key in a section of the TOML text (tomllib keeps no positions)."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()

    def line_of(self, section: str | None, key: str | None = None) -> int:
        current = None
        for number, raw in enumerate(self.lines, start=1):
            line = raw.strip()
            header = re.fullmatch(r"\[\s*([A-Za-z0-9_.-]+)\s*\]\s*(#.*)?", line)
            if header:
                current = header.group(1)
                if key is None and current == section:
                    return number
                continue
            if key is not None and current == section and re.match(rf"{re.escape(key)}\s*=", line):
                return number
        return 0

    def error(self, section: str | None, key: str | None, message: str) -> UsageError:
        # A top-level name is a [section] header, or a key written before any header.
        line = self.line_of(section, key) or (self.line_of(key) if section is None else 0)
        where = f"{self.path}:{line}" if line else str(self.path)
        name = f"{section}.{key}" if section and key else (section or key or "")
        return UsageError(f"{where}: {name}: {message}" if name else f"{where}: {message}")


def _closest(word: str, choices: list[str]) -> str:
    match = difflib.get_close_matches(word, choices, n=1, cutoff=0.5)
    return f" (did you mean {match[0]!r}?)" if match else f" (expected one of: {', '.join(choices)})"


def _check_value(loc: _Locator, section: str, key: str, value: Any) -> Any:
    """A run-point parameter's value against the field's type; returns it (ints accepted for
    float fields)."""
    spec = POINT_FIELDS[key]
    default = spec.default
    kind = type(default) if default is not None else int  # write_size: int or None
    if isinstance(value, bool) != (kind is bool):
        raise loc.error(section, key, f"expected {_type_name(kind)}, got {value!r}")
    if kind is float and isinstance(value, int):
        value = float(value)
    if not isinstance(value, kind):
        raise loc.error(section, key, f"expected {_type_name(kind)}, got {type(value).__name__} {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise loc.error(section, key, f"expected a finite number, got {value!r}")
    return value


def _type_name(kind: type) -> str:
    return {bool: "true or false", int: "a whole number", float: "a number", str: "a string"}.get(kind, kind.__name__)


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """`--set KEY=VALUE` items (VALUE in TOML syntax: 2, 0.5, "10mbit", true) as defaults."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--set {item!r}: expected KEY=VALUE")
        if key not in POINT_FIELDS:
            raise UsageError(f"--set {key}: unknown key" + _closest(key, list(POINT_FIELDS)))
        try:
            out[key] = tomllib.loads(f"v = {text.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            out[key] = text.strip()  # a bare word is a string: --set link_rate=100mbit
    return out


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> CampaignConfig:
    """Reads and checks a campaign file: unknown keys (with the closest valid one), wrong types,
    impossible values (every grid point is validated) and a missing file are UsageErrors that name
    the file, line and key. `overrides` replace [defaults] values (and take a key out of the grid)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such campaign file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(f"{path}: cannot read: {getattr(err, 'strerror', None) or err}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise UsageError(f"{path}: not valid TOML: {err}") from None
    loc = _Locator(path, text)
    for section, value in data.items():
        if section not in SECTIONS:
            raise loc.error(None, section, "unknown section or key" + _closest(section, list(SECTIONS)))
        if not isinstance(value, dict):
            raise loc.error(None, section, "expected a [section]")
    config = CampaignConfig(path=path, name=path.stem)
    for key, value in data.get("campaign", {}).items():
        if key not in CAMPAIGN_KEYS:
            raise loc.error("campaign", key, "unknown key" + _closest(key, list(CAMPAIGN_KEYS)))
        kind = CAMPAIGN_KEYS[key]
        if isinstance(value, bool) or not isinstance(value, kind):
            raise loc.error("campaign", key, f"expected {_type_name(kind)}, got {value!r}")
        setattr(config, key, value)
    if config.repetitions < 1:
        raise loc.error("campaign", "repetitions", f"expected 1 or more, got {config.repetitions}")
    if config.order not in ORDERS:
        raise loc.error("campaign", "order", f"expected one of {', '.join(ORDERS)}, got {config.order!r}")
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", config.name):
        raise loc.error("campaign", "name", "expected 1 to 64 letters, digits, '_', '.' or '-'")
    for key, value in data.get("host", {}).items():
        if key not in HOST_KEYS:
            raise loc.error("host", key, "unknown key" + _closest(key, list(HOST_KEYS)))
        kind = HOST_KEYS[key]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if isinstance(value, bool) or not isinstance(value, kind):
            raise loc.error("host", key, f"expected {_type_name(kind)}, got {value!r}")
        config.host[key] = value
    if config.host["mode"] not in HOST_MODES:
        raise loc.error("host", "mode", f"expected one of {', '.join(HOST_MODES)}, got {config.host['mode']!r}")
    if config.host["kernel"] not in KERNELS:
        raise loc.error("host", "kernel", f"expected one of {', '.join(KERNELS)}, got {config.host['kernel']!r}")
    if not config.host["vm_timeout_s"] > 0:
        raise loc.error("host", "vm_timeout_s", f"expected a positive number, got {config.host['vm_timeout_s']!r}")
    for key, value in data.get("defaults", {}).items():
        if key not in POINT_FIELDS:
            raise loc.error("defaults", key, "unknown key" + _closest(key, list(POINT_FIELDS)))
        config.defaults[key] = _check_value(loc, "defaults", key, value)
    for key, values in data.get("grid", {}).items():
        if key not in POINT_FIELDS:
            raise loc.error("grid", key, "unknown key" + _closest(key, list(POINT_FIELDS)))
        if not isinstance(values, list) or not values:
            raise loc.error("grid", key, f"expected a non-empty list of values, got {values!r}")
        config.grid[key] = [_check_value(loc, "grid", key, v) for v in values]
    for name, variant in data.get("variants", {}).items():
        section = f"variants.{name}"
        if not isinstance(variant, dict):
            raise loc.error("variants", name, "expected a [variants.NAME] table of run-point parameters")
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,32}", name):
            raise loc.error(section, None, "a variant's name: 1 to 32 letters, digits, '_' or '-'")
        config.variants[name] = {}
        for key, value in variant.items():
            if key not in POINT_FIELDS:
                raise loc.error(section, key, "unknown key" + _closest(key, list(POINT_FIELDS)))
            if key in config.grid:
                raise loc.error(section, key, "also a [grid] key: give it in one place")
            config.variants[name][key] = _check_value(loc, section, key, value)
    for key, value in (overrides or {}).items():
        try:
            config.defaults[key] = _check_value(loc, "--set", key, value)
        except UsageError as err:
            raise UsageError(f"--set {key}: {str(err).rsplit(': ', 1)[-1]}") from None
        config.grid.pop(key, None)
        for variant in config.variants.values():
            variant.pop(key, None)
    _validate_points(loc, config)
    return config


def _validate_points(loc: _Locator, config: CampaignConfig) -> None:
    """Every point is checked as the runner would, so that a bad one stops the campaign before
    its first run; the error names the key the failing parameter came from."""
    for point in config.points():
        try:
            point.validate()
        except UsageError as err:
            message = str(err)
            name = message.split(" ", 1)[0]
            in_variant = next((f"variants.{v}" for v, keys in config.variants.items()
                               if name in keys and getattr(point, name) == keys[name]), None)
            section = ("grid" if name in config.grid else in_variant or
                       ("defaults" if name in config.defaults else None))
            if section is None:  # a combination (senders + background) or a derived check
                section = "grid" if config.grid else "defaults"
                key = next((k for k in ("senders", "background") if k in config.grid or k in config.defaults), None)
                raise loc.error(section, key, message) from None
            raise loc.error(section, name, message.split(": ", 1)[-1]) from None
