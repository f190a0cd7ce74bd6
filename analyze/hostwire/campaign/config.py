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

    [hosts]                   # real machines over ssh (hostwire.campaign.hosts_config, docs/hosts.md)
    sender = "root@pc1"
    receiver = "root@pc2"

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

from hostwire.campaign.hosts_config import parse_hosts
from hostwire.errors import UsageError
from hostwire.record.hosts import HostsSpec
from hostwire.record.point import PointError, RunPoint

CAMPAIGN_KEYS = {"name": str, "repetitions": int, "order": str, "seed": int}
# Limits (docs/formats.md, "Campaign files"): a campaign's counts, and the guest's timeout.
MAX_REPETITIONS = 1000
MAX_RUNS = 100_000
MAX_SEED = 2**63 - 1
MAX_VM_TIMEOUT_S = 172800.0
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
ORDERS = ("as-written", "shuffled", "alternating")
SECTIONS = ("campaign", "host", "hosts", "defaults", "grid", "variants")
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
    overrides: dict[str, Any] = field(default_factory=dict)  # --set KEY=VALUE, also in defaults
    hosts: HostsSpec = field(default_factory=HostsSpec)

    def points(self) -> list[RunPoint]:
        """The grid's points (defaults, then the variant, applied), in the order written, last key
        fastest, each variant in turn."""
        return [point for point, _, _ in self.points_with_origin()]

    def points_with_origin(self) -> list[tuple[RunPoint, str | None, dict[str, Any]]]:
        """Each point with the variant it belongs to (None: no variants) and its grid values."""
        keys = list(self.grid)
        points = []
        for name, variant in (self.variants.items() or [(None, {})]):
            base = replace(RunPoint(), **{**self.defaults, **variant})
            for values in itertools.product(*self.grid.values()):
                chosen = dict(zip(keys, values))
                points.append((replace(base, **chosen), name, chosen))
        return points

    def resolved(self) -> dict[str, Any]:
        """The config with every default filled in, as recorded in campaign.json and manifests."""
        return {
            "campaign": {"name": self.name, "repetitions": self.repetitions, "order": self.order,
                         "seed": self.seed, "file": str(self.path)},
            "host": dict(self.host),
            **({"hosts": self.hosts.as_dict()} if self.hosts.remote else {}),
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
            header = re.fullmatch(r"\[\s*([A-Za-z0-9_. \t-]+?)\s*\]\s*(#.*)?", line)
            if header:
                current = re.sub(r"\s*\.\s*", ".", header.group(1))
                if key is None and current == section:
                    return number
                continue
            if key is not None and current == section and re.match(rf"(?:{re.escape(key)}|\"{re.escape(key)}\"|'{re.escape(key)}')\s*=", line):
                return number
        return 0

    def error(self, section: str | None, key: str | None, message: str) -> UsageError:
        # A top-level name is a [section] header, or a key written before any header.
        line = self.line_of(section, key) or (self.line_of(key) if section is None else 0)
        if not line and section and "." in section:
            # [variants] NAME = { ... }: the table is a key of its parent section
            parent, _, child = section.rpartition(".")
            line = self.line_of(parent, child)
        if not line and section and key is not None:
            line = self.line_of(section)  # at least the section's header
        where = f"{self.path}:{line}" if line else str(self.path)
        name = f"{section}.{key}" if section and key else (section or key or "")
        return UsageError(f"{where}: {name}: {message}" if name else f"{where}: {message}")


def _hosts_error(loc: _Locator, key: str, message: str) -> UsageError:
    """[hosts] KEY, or [hosts.resources.NAME] KEY: found by its table's header."""
    if key.startswith("resources."):
        parts = key.split(".", 2)
        return loc.error(f"hosts.{parts[0]}.{parts[1]}", parts[2] if len(parts) > 2 else None, message)
    return loc.error("hosts", key, message)


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
    if not 1 <= config.repetitions <= MAX_REPETITIONS:
        raise loc.error("campaign", "repetitions", f"expected 1 to {MAX_REPETITIONS}, got {config.repetitions}")
    if not 0 <= config.seed <= MAX_SEED:
        raise loc.error("campaign", "seed", f"expected a whole number from 0 to 2**63 - 1, got {config.seed}")
    if config.order not in ORDERS:
        raise loc.error("campaign", "order", f"expected one of {', '.join(ORDERS)}, got {config.order!r}")
    if not re.fullmatch(NAME_PATTERN, config.name):
        # one path component: runs/<name>; never '.', '..', a hidden or an option-like name
        raise loc.error("campaign", "name", f"{config.name!r}: expected one path component: 1 to 64 letters, "
                        "digits, '_', '.' or '-', beginning with a letter or digit")
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
    timeout = config.host["vm_timeout_s"]
    if not (math.isfinite(timeout) and 0 < timeout <= MAX_VM_TIMEOUT_S):
        raise loc.error("host", "vm_timeout_s", f"expected a positive number of seconds, at most "
                        f"{MAX_VM_TIMEOUT_S:g} (two days), got {timeout!r}")
    config.hosts = parse_hosts(data.get("hosts", {}), lambda key, message: _hosts_error(loc, key, message), _closest)
    if config.hosts.remote and config.host["mode"] == "vm":
        raise loc.error("host", "mode", "vm mode records inside a guest on this machine: not with remote [hosts]")
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
        seen: list[Any] = []
        for value in config.grid[key]:
            if value in seen:  # two runs with one key
                raise loc.error("grid", key, f"{value!r} is listed twice: each value once")
            seen.append(value)
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
        config.overrides[key] = config.defaults[key]
        config.grid.pop(key, None)
        for variant in config.variants.values():
            variant.pop(key, None)
    _validate_points(loc, config)
    return config


def _validate_points(loc: _Locator, config: CampaignConfig) -> None:
    """Every point is checked as the runner would, so that a bad one stops the campaign before
    its first run; the error names where the failing parameter's value was written: --set, the
    grid, the point's variant or [defaults] (the first of a combination's keys that is written).
    Two points that are the same run, and a campaign of more than MAX_RUNS runs, are refused."""
    points = config.points_with_origin()
    if len(points) * config.repetitions > MAX_RUNS:
        raise loc.error("grid" if config.grid else "campaign", next(iter(config.grid), "repetitions"),
                        f"{len(points) * config.repetitions} runs: at most {MAX_RUNS} in a campaign")
    seen: dict[str, str] = {}
    for point, variant, chosen in points:
        try:
            point.validate()
        except PointError as err:
            raise _point_error(loc, config, err, variant) from None
        if point.receiver_background and not config.hosts.remote:
            raise loc.error("grid" if "receiver_background" in config.grid else "defaults", "receiver_background",
                            "background processes on the receiver's host need [hosts] "
                            "(on namespaces use background)")
        if config.hosts.remote:
            from hostwire.record.remote_run import point_problems

            for problem in point_problems(point):
                raise loc.error("hosts", None, f"{problem}")
        where = (f"variant {variant!r}, " if variant else "") + (
            ", ".join(f"{k} = {v!r}" for k, v in chosen.items()) or "[defaults]")
        described = repr(sorted(vars(point).items()))
        if described in seen:
            section = f"variants.{variant}" if variant else "grid"
            raise loc.error(section, None, f"{where} is the same run as {seen[described]}: each point once "
                            "(a collectors set overrides capture, kernel_trace and syscalls)")
        seen[described] = where


def _point_error(loc: _Locator, config: CampaignConfig, err: PointError, variant: str | None) -> UsageError:
    message = str(err)
    variant_keys = config.variants.get(variant, {}) if variant else {}
    for key in err.keys:
        if key in config.overrides:
            return UsageError(f"--set {key}: {message.split(': ', 1)[-1]}")
        for section, written in (("grid", config.grid), (f"variants.{variant}", variant_keys),
                                 ("defaults", config.defaults)):
            if key in written:
                return loc.error(section, key, message.split(": ", 1)[-1])
    # a built-in default at fault (e.g. sender_cpus = "1" on a one-CPU machine): name the key
    return UsageError(f"{loc.path}: {message} (the built-in default; set {err.keys[0]} in [defaults])")
