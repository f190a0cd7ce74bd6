"""What marks a run in sanity, against runs built here: heavy retransmission, a zero window with
data outstanding and shaper drops mark it (overlimits do not); a run without senders still gives
every counter."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hostwire.metrics import synth
from hostwire.metrics.sanity import Context, df_sanity, manifest_counters
from hostwire.metrics.streams import label_streams
from hostwire.metrics.window import frame_window

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helpers beside this file (importlib mode)
from integrity_helpers import BASE, MS, S, counters_of, make_run, metrics  # noqa: E402


# --- 5. heavy loss marks the run -------------------------------------------------------------

CLEAN = {"losses": {"wire_ps_drop": 0}, "exit": {"hw-bench": 0}}


def with_retransmissions(k: int, n: int = 200) -> pd.DataFrame:
    """n new 1000-byte segments 2 ms apart and k retransmissions (of segments 10, 20, ...) 1 ms
    after a segment."""
    data = synth.frames(np.arange(n) * 2 * MS, payload=1000, headers=40)
    again = synth.frame_table(np.array([(10 * j + 10) * 2 * MS + MS for j in range(k)]), np.full(k, 1000),
                              np.array([1000 + 10 * j * 1000 for j in range(k)]), np.zeros(k), synth.SENDER,
                              synth.RECEIVER, 40000, 5001, headers=40)
    return synth.concat([data, again])


def test_a_retransmitted_share_above_the_threshold_marks_the_run() -> None:
    f = with_retransmissions(3)  # 3 of 203 data frames: 1.48 %
    c = df_sanity(f, label_streams(f), frame_window(f), 10**7, CLEAN)
    v = c.set_index("counter")["value"]
    assert v["data_frames"] == 203 and v["tcp_retransmissions"] == 3
    assert v["retransmitted_share"] == pytest.approx(3 / 203) and v["marked"] == 1
    assert c.attrs["marked_by"] == ["retransmitted_share 1.48 % above 1 % (3 of 203 data frames)"]
    f = with_retransmissions(2)  # 2 of 202: 0.99 %
    assert df_sanity(f, label_streams(f), frame_window(f), 10**7, CLEAN).set_index("counter")["value"]["marked"] == 0
    f = with_retransmissions(3)
    looser = Context(max_retransmit_share=0.02)
    assert df_sanity(f, label_streams(f), frame_window(f), 10**7, CLEAN,
                     context=looser).set_index("counter")["value"]["marked"] == 0


def acks(rows: list[tuple[int, int, int, int]]) -> pd.DataFrame:
    """Receiver frames (t_ns, ack, window, flags)."""
    parts = [synth.frame_table(np.array([t]), np.array([0]), np.array([9]), np.array([ack]), synth.RECEIVER,
                               synth.SENDER, 5001, 40000, flags=flags, window=window, headers=40)
             for t, ack, window, flags in rows]
    return synth.concat(parts)


def test_a_zero_window_with_data_outstanding_marks_the_run() -> None:
    data = synth.frames(np.arange(1, 5) * MS, payload=1000, seq0=1000, headers=40)  # bytes 1000..5000
    stalled = synth.concat([data, acks([(2_500_000, 3000, 100, 0x10), (4_500_000, 4000, 0, 0x10)])])
    c = df_sanity(stalled, label_streams(stalled), frame_window(stalled), 10**7, CLEAN)
    v = c.set_index("counter")["value"]
    assert v["zero_window_advertisements"] == 1 and v["marked"] == 1
    assert c.attrs["marked_by"][0].startswith("zero_window_advertisements 1")
    # everything acknowledged: a zero window stops nothing; an RST's window 0 is no advertisement
    idle = synth.concat([data, acks([(4_500_000, 5000, 0, 0x10), (4_600_000, 4000, 0, 0x14)])])
    v = df_sanity(idle, label_streams(idle), frame_window(idle), 10**7, CLEAN).set_index("counter")["value"]
    assert v["zero_window_advertisements"] == 0 and v["marked"] == 0


def test_shaper_drops_mark_the_run_and_overlimits_do_not() -> None:
    f = synth.frames(np.arange(0, 50) * 2 * MS, payload=1000, headers=40)
    lab = label_streams(f)
    counters = manifest_counters({"losses": {"qdisc_drops": 5, "qdisc_overlimits": 300, "wire_ps_drop": 0}})
    assert counters["shaper_drops"] == 5 and counters["shaper_overlimits"] == 300 and counters["capture_drops"] == 0
    table = df_sanity(f, lab, frame_window(f), 10**7, {"losses": {"qdisc_drops": 5, "qdisc_overlimits": 300}})
    assert table.set_index("counter")["value"]["marked"] == 1
    assert table.attrs["marked_by"] == ["shaper_drops 5 (qdisc_drops)"]
    table = df_sanity(f, lab, frame_window(f), 10**7, {"losses": {"qdisc_drops": 0, "qdisc_overlimits": 300}})
    assert table.set_index("counter")["value"]["marked"] == 0
    beside = {"losses": {"qdisc_drops": 0}, "link": {"qdisc_overlimits": 40}}  # where the runner keeps them
    v = df_sanity(f, lab, frame_window(f), 10**7, beside).set_index("counter")["value"]
    assert v["shaper_overlimits"] == 40 and v["marked"] == 0


# --- 6. a run without senders ----------------------------------------------------------------

def test_sanity_of_a_run_without_senders_gives_every_counter(tmp_path: Path, build_dir: Path) -> None:
    sync = synth.concat([
        synth.frame_table(np.array([BASE - 50 * MS]), np.array([16]), np.zeros(1), np.zeros(1), synth.SENDER,
                          synth.RECEIVER, 40999, 5002, headers=28).assign(proto=np.uint8(17)),
        synth.frame_table(np.array([BASE + 1050 * MS]), np.array([32]), np.zeros(1), np.zeros(1), synth.RECEIVER,
                          synth.SENDER, 5002, 40999, headers=28).assign(proto=np.uint8(17)),
    ])
    run = make_run(tmp_path / "run", frames=sync, writes={}, reads={}, window=(BASE, BASE + S), background=1)
    code, out, err = metrics("sanity", str(run), "--check")
    assert code == 0, err
    c = counters_of(out)
    for name in ("frames", "frame_gaps", "impossible_intervals", "data_frames", "tcp_retransmissions",
                 "zero_window_advertisements", "max_bytes_in_flight", "goodput_wire_bit_s"):
        assert c[name] == 0, name
    assert c["min_advertised_window"] == -1 and c["marked"] == 0 and c["window_ns"] == S
