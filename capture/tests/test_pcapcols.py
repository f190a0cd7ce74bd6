"""hw-pcapcols and hostwire.read_pcap: the shared corpus against tshark, and files built here with
known contents (byte orders, precisions, link types, damage)."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hostwire.errors import InputError
from hostwire.paths import tool
from hostwire.read import pcaplib
from hostwire.read.pcap import map_clock, read_columns, read_pcap

UNSUPPORTED = {"chdlc-slarp-short.pcap": "unsupported link type 104 (C_HDLC)"}


# ---- synthetic captures -------------------------------------------------------------------------

def ipv4_tcp(src: bytes, dst: bytes, sport: int, dport: int, seq: int, payload: int, *,
             flags: int = 0x18, window: int = 501, tot_len: int | None = None) -> bytes:
    tcp = struct.pack(">HHIIBBHHH", sport, dport, seq, 7, 5 << 4, flags, window, 0, 0)
    total = 20 + len(tcp) + payload if tot_len is None else tot_len
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, total, 1, 0x4000, 64, 6, 0, src, dst)
    return ip + tcp + b"x" * payload


def ipv6_udp(payload: int) -> bytes:
    udp = struct.pack(">HHHH", 5353, 53, 8 + payload, 0)
    src = bytes.fromhex("20010db8000000000000000000000001")
    dst = bytes.fromhex("20010db8000000000000000000000002")
    return struct.pack(">IHBB16s16s", 6 << 28, len(udp) + payload, 17, 64, src, dst) + udp + b"y" * payload


def ether(ip: bytes, vlan: int | None = None) -> bytes:
    head = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01"
    if vlan is not None:
        head += struct.pack(">HH", 0x8100, vlan)
    etype = 0x86DD if ip[0] >> 4 == 6 else 0x0800
    return head + struct.pack(">H", etype) + ip


def sll2(ip: bytes) -> bytes:
    etype = 0x86DD if ip[0] >> 4 == 6 else 0x0800
    return struct.pack(">HHIHBB8s", etype, 0, 2, 1, 0, 6, b"\x02\x00\x00\x00\x00\x01\x00\x00") + ip


def pcap_bytes(frames: list[tuple[int, bytes]], *, linktype: int = 1, snaplen: int = 65535, nano: bool = True,
               big_endian: bool = False, caplen: int | None = None) -> bytes:
    """frames: (t_ns, data). caplen cuts each record's data (wire length stays)."""
    e = ">" if big_endian else "<"
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    out = [struct.pack(e + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)]
    for t_ns, data in frames:
        sub = t_ns % 10**9 if nano else (t_ns % 10**9) // 1000
        cap = data[:caplen] if caplen is not None else data
        out.append(struct.pack(e + "IIII", t_ns // 10**9, sub, len(cap), len(data)) + cap)
    return b"".join(out)


def pcapng_bytes(frames: list[tuple[int, bytes]], linktype: int = 1) -> bytes:
    def block(btype: int, body: bytes) -> bytes:
        body += b"\0" * (-len(body) % 4)
        n = 12 + len(body)
        return struct.pack("<II", btype, n) + body + struct.pack("<I", n)

    tsresol = struct.pack("<HHB3x", 9, 1, 9) + struct.pack("<HH", 0, 0)  # if_tsresol = 10^-9
    out = [block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1)),
           block(1, struct.pack("<HHI", linktype, 0, 0) + tsresol)]
    for t_ns, data in frames:
        out.append(block(6, struct.pack("<IIIII", 0, t_ns >> 32, t_ns & 0xFFFFFFFF, len(data), len(data)) + data))
    return b"".join(out)


A, B = bytes([198, 18, 0, 1]), bytes([198, 18, 0, 2])
T0 = 1_700_000_000_123_456_000  # a whole number of microseconds, so micro files hold it exactly


def sample_frames(n: int = 5) -> list[tuple[int, bytes]]:
    return [(T0 + i * 1_211_000, ether(ipv4_tcp(A, B, 40000, 5001, 1000 + 1448 * i, 1448))) for i in range(n)]


@pytest.fixture
def write(tmp_path: Path):
    def _write(name: str, data: bytes) -> Path:
        path = tmp_path / name
        path.write_bytes(data)
        return path
    return _write


def pcapcols(path: Path, outdir: Path) -> tuple[int, str, dict | None]:
    proc = subprocess.run([str(tool("hw-pcapcols")), str(path), "-o", str(outdir)], capture_output=True,
                          text=True, timeout=60)
    meta_path = outdir / "columns.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else None
    return proc.returncode, proc.stderr, meta


# ---- well-formed synthetic files ----------------------------------------------------------------

@pytest.mark.sanitized
@pytest.mark.parametrize("nano", [True, False])
@pytest.mark.parametrize("big_endian", [False, True])
def test_byte_orders_and_precisions(write, nano: bool, big_endian: bool) -> None:
    frames = sample_frames()
    df = read_pcap(write("s.pcap", pcap_bytes(frames, nano=nano, big_endian=big_endian)))
    assert df["t_ns"].tolist() == [t for t, _ in frames]
    assert df["frame"].tolist() == [1, 2, 3, 4, 5]
    assert df["ip_len"].tolist() == [1488] * 5
    assert df["payload_len"].tolist() == [1448] * 5
    assert df["seq"].tolist() == [1000 + 1448 * i for i in range(5)]
    assert set(df["sport"]) == {40000} and set(df["dport"]) == {5001}
    assert df["src"].astype(str).tolist() == ["198.18.0.1"] * 5
    assert df.attrs["tstamp_precision"] == ("nano" if nano else "micro")


@pytest.mark.sanitized
def test_mapped_walk_equals_the_libpcap_pass(write, tmp_path: Path) -> None:
    # A little-endian pcap is walked in place; the same records in the other byte order go
    # through libpcap. Both must give the same column files, byte for byte: over more than one
    # chunk of rows, with IPv6, UDP, a VLAN tag, a frame the parser rejects and addresses that
    # change from frame to frame (the last-address cache).
    kinds = [ether(ipv4_tcp(A, B, 40000, 5001, 1, 1448)), ether(ipv6_udp(100)),
             ether(ipv4_tcp(B, A, 5001, 40000, 2, 0, flags=0x10), vlan=7), ether(b"\x45" + b"\0" * 10),
             ether(ipv4_tcp(bytes([198, 18, 1, 9]), B, 1, 2, 3, 10))]
    frames = [(T0 + i * 1000, kinds[i % len(kinds)]) for i in range(40_000)]
    outputs = []
    for big_endian in (False, True):
        path = write(f"{big_endian}.pcap", pcap_bytes(frames, big_endian=big_endian))
        rc, err, meta = pcapcols(path, tmp_path / str(big_endian))
        assert rc == 0, err
        outputs.append({f.name: f.read_bytes() for f in (tmp_path / str(big_endian)).glob("*.bin")})
        assert meta["rows"] == 32_000 and meta["malformed"][:2] == [4, 9]
    assert sorted(outputs[0]) == sorted(outputs[1]) and len(outputs[0]) == 16
    for name in outputs[0]:
        assert outputs[0][name] == outputs[1][name], name


@pytest.mark.sanitized
def test_conversion_in_parts_equals_the_one_pass(write, tmp_path: Path) -> None:
    # read_pcap converts in memory, a pcap file split over two threads (walked from a record start
    # guessed in its second half); the rows must be those of hw-pcapcols' one pass into files: the
    # frame numbers, the address codes (addresses first seen in either part), the malformed frames
    # and the skipped ones. Under a sanitizer build read_pcap runs hw-pcapcols --threads instead,
    # the same conversion in the tool's process (in segments, as the chunked reader asks for).
    kinds = [lambda i: ether(ipv4_tcp(bytes([198, 18, 2, i // 4000]), B, 40000 + i % 7, 5001, i, i % 300)),
             lambda i: ether(ipv6_udp(i % 200)), lambda i: ether(ipv4_tcp(B, A, 5001, 40000, i, 0, flags=0x10), vlan=7),
             lambda i: ether(b"\x45" + b"\0" * 10), lambda i: ether(b"\0" * 28)[:12] + b"\x08\x06" + b"\0" * 28]
    frames = [(T0 + i * 1000, kinds[i % len(kinds)](i)) for i in range(80_000)]
    path = write("parts.pcap", pcap_bytes(frames))
    assert path.stat().st_size > 2 * (4 << 20)  # two parts of 4 MiB at least (pcapcols_parts.c)
    rc, err, meta = pcapcols(path, tmp_path / "one")
    assert rc == 0, err
    one = read_columns(tmp_path / "one")
    if pcaplib.available():
        assert pcaplib.convert(path, 2).parts == 2
    # the chunked reader's conversion: segments of 1 MiB by two threads, written in order
    done = subprocess.run([str(tool("hw-pcapcols")), "-v", "-t", "2", "--segment", "1M", str(path), "-o", str(tmp_path / "t")],
                          capture_output=True, text=True, check=True)
    assert ", 9 parts" in done.stderr, done.stderr
    pd.testing.assert_frame_equal(read_columns(tmp_path / "t"), one)
    df = read_pcap(path)
    assert len(df) == 48_000 and df.attrs["malformed"][:2] == [4, 9] and df.attrs["skipped"] == {"arp": 16_000}
    assert df["src"].cat.categories.size == 20 + 4  # 198.18.2.0-19, A, B and two IPv6 addresses
    pd.testing.assert_frame_equal(df, one)
    assert df.attrs == one.attrs
    # a column outlives its DataFrame: the mapping goes with the last array that views it
    stamps = df["t_ns"].to_numpy()
    del df
    assert int(stamps[-1]) == T0 + 79_997 * 1000  # the last TCP or UDP frame


def test_dtypes_and_categories(write) -> None:
    frames = sample_frames(3) + [(T0 + 10**7, ether(ipv4_tcp(B, A, 5001, 40000, 9, 0, flags=0x10, window=65535)))]
    df = read_pcap(write("s.pcap", pcap_bytes(frames)))
    want = {"frame": "int64", "t_ns": "int64", "wire_len": "int64", "cap_len": "int64", "ip_len": "int64",
            "proto": "uint8", "sport": "uint16", "dport": "uint16", "seq": "uint32", "ack": "uint32",
            "flags": "uint8", "window": "uint16", "payload_len": "int64", "wscale": "int8"}
    assert {c: str(df[c].dtype) for c in want} == want
    assert isinstance(df["src"].dtype, pd.CategoricalDtype) and isinstance(df["dst"].dtype, pd.CategoricalDtype)
    assert df["dst"].astype(str).tolist() == ["198.18.0.2"] * 3 + ["198.18.0.1"]
    last = df.iloc[-1]
    assert (last["flags"], last["window"], last["payload_len"], last["ack"]) == (0x10, 65535, 0, 7)
    assert df["wscale"].tolist() == [-1] * 4  # no SYN among them


def test_link_types_vlan_sll2_raw_and_pcapng(write) -> None:
    ip4 = ipv4_tcp(A, B, 1, 2, 3, 100)
    ip6 = ipv6_udp(29)
    cases = {
        "vlan.pcap": pcap_bytes([(T0, ether(ip4, vlan=7)), (T0 + 1, ether(ip6, vlan=7))]),
        "sll2.pcap": pcap_bytes([(T0, sll2(ip4)), (T0 + 1, sll2(ip6))], linktype=276),
        "raw.pcap": pcap_bytes([(T0, ip4), (T0 + 1, ip6)], linktype=101),
        "ng.pcapng": pcapng_bytes([(T0, ether(ip4)), (T0 + 1, ether(ip6))]),
    }
    for name, data in cases.items():
        df = read_pcap(write(name, data))
        assert df["t_ns"].tolist() == [T0, T0 + 1], name
        assert df["proto"].tolist() == [6, 17], name
        assert df["ip_len"].tolist() == [len(ip4), len(ip6)], name
        assert df["payload_len"].tolist() == [100, 29], name
        assert df["src"].astype(str).tolist() == ["198.18.0.1", "2001:db8::1"], name
    assert read_pcap(write("x.pcapng", cases["ng.pcapng"])).attrs["file_format"] == "pcapng"


def test_headers_only_superpacket_and_kinds(write) -> None:
    arp = b"\xff" * 6 + b"\x02" * 6 + b"\x08\x06" + b"\0" * 28
    icmp = ether(ipv4_tcp(A, B, 0, 0, 0, 0)[:9] + b"\x01" + ipv4_tcp(A, B, 0, 0, 0, 0)[10:])
    frag = bytearray(ether(ipv4_tcp(A, B, 1, 2, 3, 10)))
    frag[14 + 6] = 0x20  # more fragments
    big = ether(ipv4_tcp(A, B, 1, 2, 3, 80000, tot_len=0))
    bad = bytearray(ether(ipv4_tcp(A, B, 1, 2, 3, 10)))
    bad[14] = 0x44  # header length 16 bytes
    frames = [(T0, arp), (T0 + 1, icmp), (T0 + 2, bytes(frag)), (T0 + 3, big), (T0 + 4, bytes(bad)),
              (T0 + 5, ether(ipv4_tcp(A, B, 1, 2, 3, 1448)))]
    df = read_pcap(write("k.pcap", pcap_bytes(frames, snaplen=128, caplen=128)))
    assert df["frame"].tolist() == [4, 6]
    assert df["ip_len"].tolist() == [80040, 1488]
    assert df["wire_len"].tolist() == [80054, 1502]
    assert df["cap_len"].tolist() == [128, 128]
    assert df["payload_len"].tolist() == [80000, 1448]
    assert df.attrs["skipped"] == {"arp": 1, "icmp": 1, "ip-fragment": 1}
    assert df.attrs["malformed"] == [5]
    assert df.attrs["frames"] == 6


def test_clock_pairs_map_onto_monotonic(write) -> None:
    frames = sample_frames(3)
    path = write("s.pcap", pcap_bytes(frames))
    # realtime runs 1 ppm faster than monotonic over 10 s
    pairs = [{"realtime_ns": T0, "monotonic_ns": 5_000_000_000},
             {"realtime_ns": T0 + 10_000_010_000, "monotonic_ns": 15_000_000_000}]
    df = read_pcap(path, clock_pairs=pairs)
    assert df["t_pcap_ns"].tolist() == [t for t, _ in frames]
    slope = 10_000_000_000 / 10_000_010_000
    assert df["t_ns"].tolist() == [5_000_000_000 + round((t - T0) * slope) for t, _ in frames]
    one = map_clock(read_pcap(path), pairs[:1])
    assert one["t_ns"].tolist() == [5_000_000_000 + t - T0 for t, _ in frames]
    with pytest.raises(InputError, match="clock_pairs"):
        read_pcap(path, clock_pairs=[{"realtime": 1}])


# ---- damaged files ------------------------------------------------------------------------------

FRAME_LEN = len(sample_frames(1)[0][1])
RECORD = 16 + FRAME_LEN


@pytest.mark.sanitized
@pytest.mark.parametrize("cut, where", [(24 + 3 * RECORD + 7, "record header"),
                                        (24 + 3 * RECORD + 16 + 100, "packet data")])
def test_file_cut_short(write, tmp_path: Path, cut: int, where: str) -> None:
    path = write("cut.pcap", pcap_bytes(sample_frames(5))[:cut])
    rc, err, meta = pcapcols(path, tmp_path / "out")
    assert rc == 1
    assert str(path) in err and where in err
    assert f"byte offset {24 + 3 * RECORD}" in err and "frame 4" in err
    assert len(err.strip().splitlines()) == 1
    assert meta is not None and meta["rows"] == 3
    assert meta["damage"]["byte_offset"] == 24 + 3 * RECORD and meta["damage"]["frame"] == 4
    with pytest.raises(InputError, match=f"byte offset {24 + 3 * RECORD}"):
        read_pcap(path)
    df = read_pcap(path, keep_damaged=True)
    assert df["frame"].tolist() == [1, 2, 3]
    assert df.attrs["damage"]["frame"] == 4


def test_pcapng_cut_short(write) -> None:
    data = pcapng_bytes(sample_frames(4))
    path = write("cut.pcapng", data[:-30])
    df = read_pcap(path, keep_damaged=True)
    assert df["frame"].tolist() == [1, 2, 3]
    assert df.attrs["damage"]["frame"] == 4
    assert df.attrs["damage"]["byte_offset"] == len(data) - (12 + 20 + FRAME_LEN + (-FRAME_LEN % 4))


def test_bad_magic(write, tmp_path: Path) -> None:
    path = write("bad.pcap", b"\x12\x34\x56\x78" + pcap_bytes(sample_frames(2))[4:])
    rc, err, meta = pcapcols(path, tmp_path / "out")
    assert rc == 1 and meta is None
    assert "unsupported format" in err and str(path) in err and len(err.strip().splitlines()) == 1
    with pytest.raises(InputError, match="unsupported format"):
        read_pcap(path)


@pytest.mark.sanitized
def test_record_longer_than_snaplen(write, tmp_path: Path) -> None:
    # a record of 200 bytes in a file whose snap length is 128: marked malformed, reading goes on
    frames = sample_frames(3)
    data = bytearray(pcap_bytes(frames, snaplen=128, caplen=128))
    long_rec = struct.pack("<IIII", T0 // 10**9, 5, 200, 1514) + frames[0][1][:200]
    data[24 + 2 * (16 + 128):24 + 2 * (16 + 128)] = long_rec
    df = read_pcap(write("long.pcap", bytes(data)))
    assert df["frame"].tolist() == [1, 2, 4]
    assert df.attrs["malformed"] == [3]
    # a record length no capture can have: the frames before it are kept, the rest is lost
    data = bytearray(pcap_bytes(frames))
    struct.pack_into("<I", data, 24 + RECORD + 8, 0x7FFFFFF0)
    path = write("huge.pcap", bytes(data))
    rc, err, meta = pcapcols(path, tmp_path / "out")
    assert rc == 1 and meta["rows"] == 1
    assert f"byte offset {24 + RECORD}" in err and "frame 2" in err and "record length" in err


def test_unsupported_and_usage(tmp_path: Path) -> None:
    proc = subprocess.run([str(tool("hw-pcapcols"))], capture_output=True, text=True)
    assert proc.returncode == 2 and "hw-pcapcols:" in proc.stderr
    proc = subprocess.run([str(tool("hw-pcapcols")), "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "EXAMPLES" in proc.stdout
    with pytest.raises(InputError, match="no such capture file"):
        read_pcap(tmp_path / "missing.pcap")


# ---- the shared corpus against tshark -----------------------------------------------------------

TSHARK_FIELDS = ["frame.number", "frame.time_epoch", "frame.len", "frame.cap_len", "ip.len", "ipv6.plen",
                 "tcp.srcport", "tcp.dstport", "udp.srcport", "udp.dstport", "tcp.len", "udp.length",
                 "tcp.seq_raw", "tcp.ack_raw", "tcp.window_size_value", "tcp.flags.syn", "tcp.options.wscale.shift",
                 "_ws.malformed", "_ws.expert"]


def tshark_table(path: Path) -> pd.DataFrame:
    proc = subprocess.run(["tshark", "-n", "-r", str(path), "-T", "fields", "-E", "occurrence=f",
                           "-E", "separator=\t", *[a for f in TSHARK_FIELDS for a in ("-e", f)]],
                          capture_output=True, text=True, timeout=120)
    rows = [line.split("\t") for line in proc.stdout.splitlines()]
    return pd.DataFrame(rows, columns=TSHARK_FIELDS)


def epoch_ns(text: str) -> int:
    sec, _, frac = text.partition(".")
    return int(sec) * 10**9 + int((frac + "000000000")[:9])


@pytest.mark.corpus
def test_corpus_matches_tshark(shared_corpus: Path) -> None:
    files = sorted((shared_corpus / "pcap").iterdir())
    assert files
    syns_with_scale = 0
    for path in files:
        if path.name in UNSUPPORTED:
            with pytest.raises(InputError) as info:
                read_pcap(path)
            assert UNSUPPORTED[path.name] in str(info.value)
            assert "\n" not in str(info.value)
            continue
        df = read_pcap(path)
        assert df.attrs["frames"] == len(df) + sum(df.attrs["skipped"].values()) + len(df.attrs["malformed"]), path
        ts = tshark_table(path)
        assert len(ts) == df.attrs["frames"], path
        ts = ts.set_index(ts["frame.number"].astype(int))
        for row in df.itertuples(index=False):  # corpus files are a few frames each
            t = ts.loc[row.frame]
            where = f"{path.name} frame {row.frame}"
            assert row.t_ns == epoch_ns(t["frame.time_epoch"]), where
            assert (row.wire_len, row.cap_len) == (int(t["frame.len"]), int(t["frame.cap_len"])), where
            ip_len = int(t["ip.len"]) if t["ip.len"] else int(t["ipv6.plen"]) + 40
            assert row.ip_len == ip_len, where
            l4 = "tcp" if row.proto == 6 else "udp"
            assert (row.sport, row.dport) == (int(t[f"{l4}.srcport"]), int(t[f"{l4}.dstport"])), where
            if row.proto == 6:
                assert row.payload_len == int(t["tcp.len"]), where
                assert (row.seq, row.ack) == (int(t["tcp.seq_raw"]), int(t["tcp.ack_raw"] or 0)), where
                assert row.window == int(t["tcp.window_size_value"]), where
                syn = t["tcp.flags.syn"] in ("1", "True")
                shift = min(int(t["tcp.options.wscale.shift"]), 14) if syn and t["tcp.options.wscale.shift"] else -1
                assert row.wscale == shift, where
                syns_with_scale += shift >= 0
            else:
                assert row.payload_len == ip_len - (ip_len - row.payload_len), where
        # frames tshark calls malformed are never rows
        bad = set(ts.index[ts["_ws.malformed"] != ""])
        assert not bad & set(df["frame"]), path
    assert syns_with_scale > 0  # the corpus has handshakes that offer a scale: the comparison is not vacuous
    # files whose contents are known
    bad_version = read_pcap(shared_corpus / "pcap" / "ipv6-bad-version.pcap")
    assert bad_version.attrs["malformed"] == [2, 4] and bad_version.attrs["skipped"] == {"icmpv6": 2}
    big = read_pcap(shared_corpus / "pcap" / "bigtcp-ipv4.pcap")
    assert big["ip_len"].tolist() == [80052] and big["payload_len"].tolist() == [80000]


@pytest.mark.corpus
def test_corpus_stamps_match_tcpdump(shared_corpus: Path) -> None:
    path = shared_corpus / "pcap" / "dns_tcp.pcap"
    out = subprocess.run(["tcpdump", "-tt", "-nn", "-r", str(path)], capture_output=True, text=True).stdout
    stamps = [epoch_ns(line.split()[0]) for line in out.splitlines()]
    assert read_pcap(path)["t_ns"].tolist() == stamps


def test_cli(write, tmp_path: Path) -> None:
    path = write("s.pcap", pcap_bytes(sample_frames(4)))
    out = tmp_path / "t.csv"
    proc = subprocess.run([sys.executable, "-m", "hostwire", "pcapcols", str(path), "-o", str(out)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "frames 4, TCP/UDP rows 4" in proc.stdout
    table = pd.read_csv(out)
    assert table["t_ns"].tolist() == [t for t, _ in sample_frames(4)]
    assert table["src"].tolist() == ["198.18.0.1"] * 4
    cut = write("cut.pcap", pcap_bytes(sample_frames(4))[:-5])
    proc = subprocess.run([sys.executable, "-m", "hostwire", "pcapcols", str(cut)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and "frame 4" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.sanitized
@pytest.mark.corpus
def test_corpus_and_mutations_never_crash(shared_corpus: Path, tmp_path: Path) -> None:
    """Every corpus file, and 300 copies of a capture with random bytes overwritten or cut: the C
    tool ends with 0 or 1 and one line at most, never a crash or a sanitizer report."""
    inputs = sorted((shared_corpus / "pcap").iterdir())
    rng = np.random.default_rng(5)
    base = pcap_bytes(sample_frames(6) + [(T0 + 9, ether(ipv6_udp(20), vlan=3))], snaplen=128, caplen=128)
    ng = pcapng_bytes(sample_frames(3))
    for i in range(300):
        data = bytearray(base if i % 3 else ng)
        for pos in rng.integers(0, len(data), size=int(rng.integers(1, 8))):
            data[pos] = int(rng.integers(0, 256))
        if i % 5 == 0:
            data = data[: int(rng.integers(0, len(data)))]
        path = tmp_path / f"m{i}.pcap"
        path.write_bytes(bytes(data))
        inputs.append(path)
    for path in inputs:
        proc = subprocess.run([str(tool("hw-pcapcols")), str(path), "-o", str(tmp_path / "out")],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode in (0, 1), (path, proc.returncode, proc.stderr[-2000:])
        assert len(proc.stderr.strip().splitlines()) <= 1, (path, proc.stderr[-2000:])


def test_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    # hw-pcapcols sets its own parent-death signal (Python starts it without a pre-exec step). A
    # parent killed with SIGKILL while the tool waits on its input (a FIFO nobody writes) must
    # take the tool with it; a tool whose named parent is already gone must not start at all.
    import contextlib
    import os
    import signal
    import time

    fifo = tmp_path / "never-written.pcap"
    os.mkfifo(fifo)
    parent = subprocess.Popen(
        [sys.executable, "-c",
         "import subprocess, sys, time\n"
         "from hostwire.lifeline import die_with_parent_env\n"
         f"p = subprocess.Popen([{str(tool('hw-pcapcols'))!r}, {str(fifo)!r}, '-o', {str(tmp_path / 'out')!r}],"
         " env=die_with_parent_env())\n"
         "print(p.pid, flush=True)\n"
         "time.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    child = 0
    try:
        child = int(parent.stdout.readline())
        time.sleep(0.2)  # the child is in its blocking open of the FIFO
        assert Path(f"/proc/{child}").exists()
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        def alive() -> bool:  # a zombie is dead: whoever inherited it may reap it late
            try:
                return Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
            except (FileNotFoundError, ProcessLookupError):
                return False

        deadline = time.monotonic() + 5
        while alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not alive(), "hw-pcapcols outlived the process that started it"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if child and Path(f"/proc/{child}").exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)  # ours: the tool this test started, left behind
    orphan = subprocess.run([str(tool("hw-pcapcols")), str(fifo), "-o", str(tmp_path / "out2")],
                            env=dict(os.environ, HOSTWIRE_PARENT_PID="1"), capture_output=True, timeout=10)
    assert orphan.returncode == 1 and not (tmp_path / "out2").exists()
