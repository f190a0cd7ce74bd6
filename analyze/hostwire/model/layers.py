"""The layered model of a grid point (docs/model.md): M senders and N sieves on the sender host's
CPU, the wire behind it, TCP's windows as the population of the closed loop between them.

Upper layer, the scheduler: the sender host's processes share the CPU they are given (a cgroup
quota q of one CPU, or the whole CPU) in proportion to their weights. A sieve never blocks; a
sender's effective weight w against a sieve is measured (hostwire.model.calibration): the
scheduler's fair share says w = 1, and a sender that blocks on its socket buffer while the group
waits out its quota period claims less. The senders' share is s = wM / (wM + N).

Lower layer, two servers in a closed loop:
- the CPU: with the whole of its capacity the senders alone make C bit/s of goodput (measured);
  with the share s they make s C, so a frame's demand there is 1 / (s C / payload bits);
- the wire, where a shaper enforces the rate R: eta R 1448/1514, eta the measured busy share of
  a wire-limited calibration run (a tbf's timer leaves part of each period idle); a veth without
  a shaper is no server at all.
The population is TCP's initial window of 10 frames per sender (the smallest it holds); exact MVA
(hostwire.model.mva) gives the loop's throughput, which tends to min(s C, wire) as the windows
grow. The regime is the station with the larger demand.

Jain's index: the scheduler gives the senders equal weights and the wire serves the frames in
order, so the model says 1 wherever the windows are equal. A deep FIFO that never drops lets
windows of unequal size share it (docs/paper-comparison.md, "Fairness"): the index is then set by
the connections' history, not by the inputs, and the prediction is flagged `deep-fifo`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hostwire.model.mva import solve_closed

MSS_BYTES = 1448  # payload of a full frame with TCP timestamps
FRAME_BYTES = 1514  # its length on the veth, as the shaper counts it (docs/metrics.md, "goodput")
PAYLOAD_SHARE = MSS_BYTES / FRAME_BYTES
INITIAL_WINDOW_FRAMES = 10  # RFC 6928, Linux's initial congestion window
# A shaper queue deeper than the windows' growth can fill before the first loss: measured, the
# 1000-frame tbf queue at 100 Mbit/s dropped nothing at 10 and 20 senders with a quota.
DEEP_FIFO_FRAMES = 200


@dataclass(frozen=True)
class Setup:
    """What the model needs to know of a point's set-up besides its mix."""

    cpu_share: float  # the cgroup quota as a share of one CPU; 0: no quota (one whole CPU)
    link_rate_bit_s: float
    rate_enforced: bool  # a shaper holds the link to its rate
    queue_frames: int  # the shaper's queue (link_queue)

    def describe(self) -> str:
        cpu = f"CPU cap {100 * self.cpu_share:g} %" if self.cpu_share else "no CPU cap"
        wire = (f"{self.link_rate_bit_s / 1e6:g} Mbit/s shaper, {self.queue_frames}-frame queue"
                if self.rate_enforced else "no shaper")
        return f"{wire}, {cpu}"


@dataclass(frozen=True)
class Calibration:
    """The measured inputs of one set-up (hostwire.model.calibration). C and w were measured at
    one or more numbers of senders M_c (`by_senders`: (M_c, C, w) each); between two of them the
    model interpolates in log M, beyond them it keeps the nearest."""

    cpu_goodput_bit_s: float  # C: the senders' goodput with the whole of their CPU, no sieve; inf: never limited
    sender_weight: float  # w: a sender's weight against a sieve
    wire_efficiency: float  # eta: busy share of a wire-limited run
    source: str  # where it was measured
    by_senders: tuple[tuple[int, float, float], ...] = ()

    def at(self, senders: int) -> tuple[float, float]:
        """C and w for M senders."""
        points = sorted(p for p in self.by_senders if math.isfinite(p[1]))
        if len(points) < 2:
            return self.cpu_goodput_bit_s, self.sender_weight
        m = np.log([p[0] for p in points])
        x = math.log(senders)
        capacity = math.exp(float(np.interp(x, m, np.log([p[1] for p in points]))))
        weight = math.exp(float(np.interp(x, m, np.log([p[2] for p in points]))))
        return capacity, weight


@dataclass(frozen=True)
class Prediction:
    senders: int
    background: int
    goodput_bit_s: float
    goodput_per_sender_bit_s: float
    jain: float
    cpu_wait_share: float  # share of the loop's frames waiting for the CPU (MVA queue at the CPU)
    regime: str  # "cpu" or "wire"
    sender_share: float  # s: the senders' share of the CPU they are given
    cpu_bound_bit_s: float
    wire_bound_bit_s: float
    flags: tuple[str, ...]
    why: str


def sender_share(senders: int, background: int, weight: float) -> float:
    """The senders' share of the group's CPU under weighted fair sharing."""
    if senders <= 0:
        return 0.0
    return weight * senders / (weight * senders + background)


def wire_bound(setup: Setup, calibration: Calibration) -> float:
    """Goodput the wire allows: the payload share of the enforced rate, times eta; inf without a shaper."""
    if not setup.rate_enforced:
        return math.inf
    return calibration.wire_efficiency * setup.link_rate_bit_s * PAYLOAD_SHARE


def predict(senders: int, background: int, setup: Setup, calibration: Calibration) -> Prediction:
    """The model's goodput, Jain's index and CPU wait for one point (docs/model.md)."""
    if senders < 1 or background < 0:
        raise ValueError(f"senders {senders}, background {background}: expected 1 or more senders, 0 or more sieves")
    capacity, weight = calibration.at(senders)
    share = sender_share(senders, background, weight)
    cpu_bound = share * capacity
    wire = wire_bound(setup, calibration)
    frame_bits = MSS_BYTES * 8
    demands = [frame_bits / cpu_bound if math.isfinite(cpu_bound) else 0.0,
               frame_bits / wire if math.isfinite(wire) else 0.0]
    if demands[0] == 0.0 and demands[1] == 0.0:
        raise ValueError("neither the CPU nor the wire limits this set-up: the calibration measured no bound")
    result = solve_closed(np.array(demands), INITIAL_WINDOW_FRAMES * senders)
    goodput = result.throughput * frame_bits
    regime = "cpu" if demands[0] >= demands[1] else "wire"
    population = INITIAL_WINDOW_FRAMES * senders
    cpu_wait = float(result.queue_lengths[0] / population)
    flags: list[str] = []
    deep_fifo = regime == "wire" and setup.rate_enforced and setup.queue_frames >= DEEP_FIFO_FRAMES and senders > 1
    if deep_fifo:
        flags.append("deep-fifo")
    if not math.isfinite(capacity):
        flags.append("cpu-unmeasured")
    why = _why(regime, senders, background, share, cpu_bound, wire, deep_fifo)
    return Prediction(senders, background, goodput, goodput / senders, 1.0, cpu_wait, regime, share,
                      cpu_bound, wire, tuple(flags), why)


def _why(regime: str, senders: int, background: int, share: float, cpu_bound: float, wire: float,
         deep_fifo: bool) -> str:
    if regime == "wire":
        text = (f"wire-limited: the senders' share {share:.2f} of the CPU would carry "
                + (f"{cpu_bound / 1e6:.0f}" if math.isfinite(cpu_bound) else "more than")
                + f" Mbit/s, above the wire's {wire / 1e6:.1f}; the mix does not matter")
        if deep_fifo:
            text += "; a deep FIFO keeps the windows as they grew, so the index is not the model's to tell"
        return text
    return (f"CPU-limited: {senders} senders against {background} sieves get {100 * share:.1f} % of the CPU, "
            f"{cpu_bound / 1e6:.1f} Mbit/s" + (f" (the wire allows {wire / 1e6:.1f})" if math.isfinite(wire) else ""))
