"""`hostwire metrics` on a pcap file gives the same tables as on the same frames given directly
(the pcap is written here with dpkt from synthetic frames; hostwire.read.pcap reads it)."""

from __future__ import annotations

import contextlib
import io
import socket
import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import hostwire.read.pcap  # noqa: F401  (the reader the commands call: broken, it fails this module, never skips it)
from hostwire.cli import main
from hostwire.metrics import synth

S = 10**9


def metrics(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["metrics", *args])
    return code, out.getvalue(), err.getvalue()


def write_pcap(frames: pd.DataFrame, path: Path) -> None:
    """A nanosecond pcap (magic a1b23c4d) of Ethernet/IPv4/TCP frames; stamps exact to the ns."""
    import dpkt

    with open(path, "wb") as handle:
        handle.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))
        for row in frames.itertuples():  # a few thousand frames of a test fixture
            tcp = dpkt.tcp.TCP(sport=int(row.sport), dport=int(row.dport), seq=int(row.seq), ack=int(row.ack),
                               flags=int(row.flags), win=int(row.window), data=b"x" * int(row.payload_len))
            tcp.off = 5
            ip = dpkt.ip.IP(src=socket.inet_aton(str(row.src)), dst=socket.inet_aton(str(row.dst)), p=6, ttl=64,
                            data=tcp)
            ip.len = 20 + len(bytes(tcp))
            eth = bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6, type=dpkt.ethernet.ETH_TYPE_IP,
                                               data=ip))
            sec, nsec = divmod(int(row.t_ns), S)
            handle.write(struct.pack("<IIII", sec, nsec, len(eth), len(eth)) + eth)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    rng = np.random.default_rng(4)
    base = 1_700_000_000 * S  # a realistic REALTIME stamp
    a = synth.frames(base + synth.poisson(rng, 400.0, 2 * S), payload=1448, headers=40)
    b = synth.frames(base + synth.constant_rate(3_000_000, 2 * S, 1000), payload=500, sport=40001, headers=40)
    frames = synth.concat([a, b])
    directory = tmp_path_factory.mktemp("pcap")
    write_pcap(frames, directory / "wire.pcap")
    frames.to_parquet(directory / "frames.parquet")
    return directory / "wire.pcap", directory / "frames.parquet"


@pytest.mark.parametrize("kind", ["intervals", "bursts", "idc", "contract", "fairness", "goodput"])
def test_pcap_and_frame_table_agree(kind: str, pair: tuple[Path, Path], build_dir: Path) -> None:
    pcap, table = pair
    code_p, out_p, err_p = metrics(kind, str(pcap))
    code_t, out_t, err_t = metrics(kind, str(table))
    assert code_p == 0 and code_t == 0, err_p + err_t
    pd.testing.assert_frame_equal(pd.read_csv(io.StringIO(out_p)), pd.read_csv(io.StringIO(out_t)))


@pytest.mark.corpus
@pytest.mark.parametrize("kind", ["intervals", "bursts", "idc", "contract", "fairness", "sanity"])
def test_other_tools_captures_give_a_table_or_one_line(kind: str, shared_corpus: Path, build_dir: Path) -> None:
    """Captures written by other tools (IPv6, TSO super-packets, a handshake only, damaged files):
    a table, or one line naming the problem; never a traceback."""
    tables = 0
    for pcap in sorted((shared_corpus / "pcap").iterdir()):
        code, out, err = metrics(kind, str(pcap))
        if code == 0:
            table = pd.read_csv(io.StringIO(out))
            assert len(table) and err == "", pcap
            tables += 1
        else:
            assert code == 1 and out == "" and len(err.strip().splitlines()) == 1, (pcap, err)
            assert err.startswith("hostwire: ")
    assert tables >= 1
