"""What each metric kind reads of a run: the raw files it needs (one file of each required group)
and those it uses when present. `hostwire metrics` checks them before any work and names what a
run lacks; a report asks `Run.can(needs_of(kind))` to leave out what a run cannot give. A bare capture is
the frames themselves: these declarations concern run directories."""

from __future__ import annotations

from hostwire.errors import UsageError
from hostwire.read.needs import Need, Needs

WIRE = "raw/wire.pcap"
WIRECAP = "raw/wirecap.json"
SENDS = "raw/bench/send-*.tsv"
RECEIVES = "raw/bench/recv-*.tsv"
BACKGROUND = "raw/bench/bg-*.tsv"
CLOCK_SYNC = "raw/bench/main.tsv"
BENCH_JSON = "raw/bench/bench.json"

FRAMES = Need((WIRE,), "wire frames")
WRITES = Need((SENDS,), "senders' logs")
FRAMES_OR_WRITES = Need((WIRE, SENDS))
FRAMES_OR_READS = Need((WIRE, RECEIVES))

# The senders' and receivers' logs name a run's data streams; wirecap.json maps the capture's
# stamps onto the run's clock.
ON_THE_WIRE = (WIRECAP, SENDS, RECEIVES)

KINDS: dict[str, Needs] = {
    "intervals": Needs("intervals", (FRAMES_OR_WRITES,), (WIRECAP, RECEIVES)),
    "bursts": Needs("bursts", (FRAMES,), ON_THE_WIRE),
    "idc": Needs("idc", (FRAMES,), ON_THE_WIRE),
    "hurst": Needs("hurst", (FRAMES,), ON_THE_WIRE),
    "contract": Needs("contract", (FRAMES,), ON_THE_WIRE),
    "fairness": Needs("fairness", (FRAMES_OR_READS,), (WIRECAP, SENDS)),
    "goodput": Needs("goodput", (FRAMES_OR_READS,), (WIRECAP, SENDS)),
    "sanity": Needs("sanity", (), (WIRE, WIRECAP, SENDS, RECEIVES, BACKGROUND, CLOCK_SYNC, BENCH_JSON)),
    # hostwire gaps: the kernel trace and the system calls or the senders' logs tell causes apart
    "gaps": Needs("gaps", (FRAMES,), (WIRECAP, SENDS, RECEIVES, "raw/sched.tsv", "raw/syscalls.tsv")),
}
CONTRACT_OF_WRITES = Needs("contract --cells-from write", (WRITES,), (RECEIVES,))


def needs_of(kind: str, cells_from: str = "wire") -> Needs:
    """The raw files metric `kind` reads of a run; `cells_from` as `metrics contract --cells-from`."""
    if kind not in KINDS:
        raise UsageError(f"unknown metric kind {kind!r}; expected one of {', '.join(KINDS)}")
    if kind == "contract" and cells_from == "write":
        return CONTRACT_OF_WRITES
    return KINDS[kind]
