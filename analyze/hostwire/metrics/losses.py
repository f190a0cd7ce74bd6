"""The loss counters of a run's manifest (DESIGN.md section 8): each collector's counters by
category (capture drops, trace overruns, tracer misses, log overflows, sieve failures, shaper drops
and overlimits), the checks that failed and the children that did not exit cleanly. Sanity marks a
run by them; the timeline's ledger names where records went missing by the same categories."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

# The DESIGN.md category of a manifest loss counter, from its name as the runner writes it
# (wire_ps_drop, <buffer>_lost_events, <buffer>_missed_in_stream, syscalls_lost,
# syscalls_unfinished, bench_log_overflow, sieve_check_failures, qdisc_drops, qdisc_overlimits);
# first match wins, and a counter of another name is kept under loss.<name> and still marks the
# run when non-zero. The shaper's drops are losses on the path; its overlimits (frames held back
# by the rate) are what a shaper does, counted but never marking.
LOSS_CATEGORIES: tuple[tuple[str, Callable[[str], bool]], ...] = (
    ("shaper_drops", lambda k: k.startswith("qdisc") and "drop" in k),
    ("shaper_overlimits", lambda k: k.startswith("qdisc") and "overlimit" in k),
    ("capture_drops", lambda k: k.startswith("wire_") or "drop" in k),
    ("trace_overruns", lambda k: k.endswith(("_lost_events", "_missed_in_stream")) or "overrun" in k),
    ("tracer_misses", lambda k: k.startswith("syscalls_") or "miss" in k),
    ("log_overflows", lambda k: "overflow" in k),
    ("sieve_failures", lambda k: "sieve" in k),
)


def manifest_counters(manifest: Mapping[str, Any] | None) -> dict[str, int]:
    """The loss counters of a run's manifest: each numeric counter of `losses` as `loss.<name>`,
    their sums per DESIGN.md category, `unknown_losses` (counters the run could not read: null),
    `failed_checks` (boolean checks such as sched_clock_check_ok that are false; each also as
    `check.<name>`, 1 ok, 0 failed) and `unclean_exits`, the exit statuses under `exit` (hw-bench
    and each process by role) that are neither 0 nor "ok"."""
    out = {name: 0 for name, _ in LOSS_CATEGORIES}
    out.update(unclean_exits=0, failed_checks=0, unknown_losses=0)
    if not manifest:
        return out
    leaves: dict[str, int] = {}
    checks: dict[str, int] = {}
    unknown: list[str] = []
    _flatten(manifest.get("losses", {}), "", leaves, checks, unknown)
    declared = manifest.get("loss_categories") if isinstance(manifest.get("loss_categories"), Mapping) else None
    for key, value in leaves.items():
        name = loss_category(key, declared)
        if name is not None:
            out[name] += value
    link = manifest.get("link")
    overlimits = link.get("qdisc_overlimits") if isinstance(link, Mapping) else None
    if not any(loss_category(k, declared) == "shaper_overlimits" for k in leaves) and isinstance(overlimits, int):
        out["shaper_overlimits"] += overlimits  # the runner keeps them beside the losses
    out["unclean_exits"] = _unclean(manifest.get("exit", {}))
    out["failed_checks"] = sum(1 for ok in checks.values() if not ok)
    out["unknown_losses"] = len(unknown)
    out.update({f"loss.{k}": v for k, v in leaves.items()})
    out["_categories"] = {k: loss_category(k, declared) for k in leaves}  # type: ignore[assignment]
    out.update({f"check.{k}": v for k, v in checks.items()})
    return out


def loss_category(key: str, declared: Mapping[str, str] | None = None) -> str | None:
    """The category of a manifest loss counter (None: uncategorised): the one its collector
    declared in the manifest's `loss_categories`, else the one its name implies (manifests of
    runs recorded before the collectors declared them)."""
    if declared and declared.get(key) in {name for name, _ in LOSS_CATEGORIES}:
        return declared[key]
    for name, matches in LOSS_CATEGORIES:
        if matches(key.lower()):
            return name
    return None


def _unclean(node: Any) -> int:
    """Exit statuses that are neither 0 nor "ok" (a signal, a code, "killed", ...)."""
    if isinstance(node, Mapping):
        return sum(_unclean(v) for v in node.values())
    if node is None:
        return 0
    if isinstance(node, (int, float)) and not isinstance(node, bool):
        return int(node != 0)
    return int(str(node).strip().lower() not in ("ok", "0"))


def _flatten(node: Any, prefix: str, counters: dict[str, int], checks: dict[str, int], unknown: list[str]) -> None:
    if isinstance(node, Mapping):
        for key, value in node.items():
            _flatten(value, f"{prefix}.{key}" if prefix else str(key), counters, checks, unknown)
    elif node is None:
        unknown.append(prefix)
    elif isinstance(node, bool):
        checks[prefix] = int(node)
    elif isinstance(node, (int, float)):
        counters[prefix] = int(node)
