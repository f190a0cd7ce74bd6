"""The receiver when the sender host is starved: 20 senders and 10 sieves share 2 % of one CPU, so
a sender may wait seconds between its connect and its hello (measured here: up to 6 s, while the
receiver used to give each hello 5 s and wait for it with every other connection on hold). Every
connection must be served and logged, and no connection may wait for another one's hello: each
sender that wrote in the window was read within 250 ms of its first write."""

from __future__ import annotations

from pathlib import Path

import pytest

from hostwire.record.point import RunPoint
from hostwire.record.runner import record_run

SENDERS = 20
# Under this cap the last sender's hello came 9 to 11 s after the run's start (measured): the
# window reaches some 4 s past that, so that on a quiet host every sender writes in it.
POINT = dict(senders=SENDERS, background=10, sieve_log2=16, warmup_s=1.0, duration_s=14.0, quiet_s=0.2,
             link_rate="100mbit", sender_cpu_share=0.02, collectors="none")
# From a sender's first write in the window to its receiving process's first read: at most 40 ms
# measured when each connection is served as its hello comes; 0.9 to 2.5 s at worst in a run when
# the receiver waited for each hello in turn, with the connections after it on hold.
MAX_FIRST_READ_LAG_NS = 250_000_000
# Measured: all 20 wrote on a quiet host, 12 in a CI run; the bug this test guards against delayed
# every connection behind the first slow hello, so a handful of writers shows it.
MIN_WRITERS = 5


@pytest.mark.privileged("netns")
@pytest.mark.slow
@pytest.mark.long  # a 14 s window: the last of 20 starved senders says hello after 9-11 s
def test_every_connection_of_a_starved_sender_host_is_served(tmp_path: Path, build_dir: Path) -> None:
    record = record_run(tmp_path, "starved", RunPoint(**POINT))  # type: ignore[arg-type]
    summary = record.bench.summary if record.bench else {}
    assert record.status == "complete", (record.reason, summary.get("failures"))
    assert summary["status"] == "ok" and not summary["failures"]
    received = {r["index"]: r["bytes_total"] for r in summary["receivers"] if r["exit_status"] == 0}
    sent = {p["index"]: p["bytes_total"] for p in summary["processes"] if p["kind"] == "send"}
    assert sorted(received) == list(range(SENDERS))
    assert received == sent, (received, sent)
    # When a sender first writes depends on the host's load, not on the receiver: on a busier host
    # (a CI run) the last 8 of 20 wrote nothing in the window. Those that wrote in it are the
    # test's subjects, and enough of them must have.
    _, window_end = record.bench.window_ns
    lags = {}
    for i in range(SENDERS):  # each connection's log is stored, and was read from the start
        writes = record.bench.log(f"send-{i}").df
        ends = writes.loc[writes["event"] == "write_end", "t_ns"]
        if not len(ends) or ends.min() > window_end - MAX_FIRST_READ_LAG_NS:
            continue  # no write, or one so late that its read may fall after the window's log
        reads = record.bench.log(f"recv-{i}").df
        assert len(reads), f"send-{i} wrote {len(ends)} times in the window, recv-{i} read nothing"
        lags[i] = int(reads["t_ns"].min() - ends.min())
    assert len(lags) >= MIN_WRITERS, f"only {len(lags)} of {SENDERS} senders wrote in the window: {sent}"
    late = {f"recv-{i}": f"{ns / 1e9:.3f} s" for i, ns in lags.items() if ns > MAX_FIRST_READ_LAG_NS}
    assert not late, f"first read after the sender's first write by {late}"
