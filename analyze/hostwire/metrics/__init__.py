"""Traffic metrics (DESIGN.md section 8): frame and write intervals, bursts, IDC, Hurst, the
zero-loss ATM contract, Jain's fairness, goodput (unique bytes on the wire) and the sanity counters
of a run. Functions work on numpy arrays; each `df_*` takes frame/write/received DataFrames and a
Window, so it works on a bare capture and on a run. `table(kind, input, **options)` returns what
`hostwire metrics` prints."""

from hostwire.metrics.bursts import df_bursts, split_bursts
from hostwire.metrics.cells import cell_stamps, cell_time_ns, cells_per_frame, cells_per_write
from hostwire.metrics.compute import table
from hostwire.metrics.contract import df_contract, df_min_scr, mbs_min, tau_min
from hostwire.metrics.damage import DamagedSource
from hostwire.metrics.fairness import bytes_per_stream, df_fairness, jain_index
from hostwire.metrics.goodput import (df_goodput, goodput_against_mix, goodput_bps, max_payload_bit_s,
                                      wire_bytes_per_stream)
from hostwire.metrics.hurst import df_hurst, variance_time_fit
from hostwire.metrics.idc import df_idc, idc_curve, t_grid
from hostwire.metrics.intervals import df_interval_histogram, df_intervals
from hostwire.metrics.sanity import df_sanity
from hostwire.metrics.streams import delivered_bytes, first_coverage, label_streams, select_streams
from hostwire.metrics.window import frame_window
from hostwire.window import Window

__all__ = [
    "DamagedSource", "Window", "bytes_per_stream", "cell_stamps", "cell_time_ns", "cells_per_frame",
    "cells_per_write", "delivered_bytes", "df_bursts", "df_contract", "df_fairness", "df_goodput", "df_hurst",
    "df_idc", "df_interval_histogram", "df_intervals", "df_min_scr", "df_sanity", "first_coverage",
    "frame_window", "goodput_against_mix", "goodput_bps", "idc_curve", "jain_index", "label_streams",
    "max_payload_bit_s", "mbs_min", "select_streams", "split_bursts", "t_grid", "table", "tau_min",
    "variance_time_fit", "wire_bytes_per_stream",
]
