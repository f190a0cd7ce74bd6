"""Exact Mean Value Analysis of a closed, single-class queueing network (Reiser and Lavenberg,
1980): queueing stations with a service demand each and one delay (think) time, solved for a
population of n customers by the recursion over 1..n.

hostwire's model (hostwire.model.layers) has two queueing stations, the sender host's CPU and the
wire, and TCP's windows as the population; the recursion is a few lines, exact, and checked in
the tests against its closed forms (one station: X = 1/D; K balanced stations:
X(n) = n / ((n + K - 1) D))."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class MvaResult:
    throughput: float  # customers (frames) per second
    queue_lengths: np.ndarray  # mean customers at each station, waiting or in service
    residence_times: np.ndarray  # seconds per visit at each station, waiting and service
    utilizations: np.ndarray  # throughput x demand, per station


def solve_closed(demands_s: np.ndarray | list[float], population: int, think_s: float = 0.0) -> MvaResult:
    """MVA for `population` customers cycling through queueing stations with the given service
    demands (seconds per cycle at each station) and a delay station of `think_s`. A station of
    demand 0 is a station that is not there (no wait, no work)."""
    demands = np.asarray(demands_s, dtype=float)
    if population < 1:
        raise ValueError(f"population {population}: expected 1 or more")
    if np.any(~np.isfinite(demands)) or np.any(demands < 0) or think_s < 0:
        raise ValueError("demands and think time must be finite and 0 or more")
    if demands.sum() + think_s <= 0:
        raise ValueError("a network without any demand has no finite throughput")
    queues = np.zeros_like(demands)
    throughput = 0.0
    residence = demands.copy()
    for n in range(1, population + 1):
        residence = demands * (1.0 + queues)  # arrival theorem: a customer sees the network with n - 1
        throughput = n / (think_s + residence.sum())
        queues = throughput * residence
    return MvaResult(throughput, queues, residence, throughput * demands)
