"""hostwire.read.sched readers on inline snippets: types, empty cells, bad input named precisely."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from hostwire.errors import InputError
from hostwire.read.sched import loss_table, read_sched_json, read_sched_tsv

SCHED = (
    "# format: hostwire-tsv 1\n# source: hw-schedtrace\n"
    "# column_types: int int str int str str int uint str\n"
    "t_ns\tcpu\tevent\tpid\tcomm\tprev_comm\tprev_pid\tsock_cookie\tskbaddr\n"
    "100\t0\tsched_switch\t7\tcat\tcat\t7\t\t\n"
    "250\t1\ttcp_probe\t0\t\t\t\t18446744073709551615\t0xffff888102eeca00\n"
    "300\t1\tprint\t9\ta\\tb\t\t\t\t\n"
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_sched_tsv_types(tmp_path: Path) -> None:
    meta, df = read_sched_tsv(write(tmp_path, "sched.tsv", SCHED))
    assert meta["source"] == "hw-schedtrace"
    assert df["t_ns"].tolist() == [100, 250, 300] and df["t_ns"].dtype == "int64"
    assert df["prev_pid"].dtype == "Int64" and df["prev_pid"].isna().tolist() == [False, True, True]
    assert df["sock_cookie"].dtype == "UInt64" and df["sock_cookie"].iloc[1] == 2**64 - 1
    assert df["skbaddr"].iloc[1] == "0xffff888102eeca00" and df["skbaddr"].iloc[0] == ""
    assert df["comm"].tolist() == ["cat", "", "a\\tb"]
    _, few = read_sched_tsv(tmp_path / "sched.tsv", columns=["prev_pid"])
    assert list(few.columns) == ["t_ns", "cpu", "event", "pid", "comm", "prev_pid"]


@pytest.mark.parametrize("text, message", [
    (SCHED.replace("int int str int str str int uint str", "int int str"), "names 3 kinds for 9 columns"),
    (SCHED.replace("100\t0", "1x2\t0"), "malformed record"),
    (SCHED.replace("300\t1\tprint\t9", "300\t1\tprint\t"), "column pid is empty"),
    (SCHED.replace("hostwire-tsv 1", "hostwire-tsv 7"), "newer than this hostwire reads"),
    (SCHED.replace("prev_pid\tsock", "other\tsock"), "a"),
])
def test_sched_tsv_rejects(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, "sched.tsv", text)
    if message == "a":  # a renamed column is fine unless asked for
        read_sched_tsv(path)
        with pytest.raises(InputError, match="no column prev_pid"):
            read_sched_tsv(path, columns=["prev_pid"])
        return
    with pytest.raises(InputError, match=message):
        read_sched_tsv(path)


def test_sched_json_and_losses(tmp_path: Path) -> None:
    stat = {"entries": 1, "overrun": 0, "commit_overrun": 0, "bytes": 9, "dropped_events": 0, "read_events": 0}
    end = dict(stat, entries=5, overrun=40, read_events=None)
    data = {"format": "hostwire-sched 1", "buffers": [{"name": "sched", "cpus": [
        {"cpu": 0, "records": 5, "missed_in_stream": 2, "start": stat, "end": end}]}]}
    path = write(tmp_path, "sched.json", json.dumps(data))
    table = loss_table(read_sched_json(path))
    row = table.iloc[0]
    assert (row["entries"], row["overrun"], row["missed_in_stream"]) == (4, 40, 2)
    assert pd.isna(row["read_events"])  # unknown stays unknown, never 0
    with pytest.raises(InputError, match="newer than this hostwire"):
        read_sched_json(write(tmp_path, "new.json", json.dumps(dict(data, format="hostwire-sched 2"))))
    with pytest.raises(InputError, match="malformed JSON"):
        read_sched_json(write(tmp_path, "bad.json", "{"))
