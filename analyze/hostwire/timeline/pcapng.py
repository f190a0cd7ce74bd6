"""The run's capture as pcapng whose every data frame carries a comment naming its owner: the
stream, the sending process (pid, role) and the write(s) whose bytes it carries, so that Wireshark
and tshark (`frame.comment`) show who put each packet on the wire.

dpkt writes the blocks. The stamps are copied as integers: the pcap's nanosecond records are read
here (dpkt's reader gives float seconds, which round nanoseconds away) and written as
nanosecond-resolution enhanced packet blocks (if_tsresol 9)."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from hostwire.errors import HostwireError, InputError
from hostwire.timeline.build import Timeline

PCAP_MAGIC = {0xA1B2C3D4: 1000, 0xA1B23C4D: 1}  # microsecond or nanosecond records: ns per unit
OPT_IF_TSRESOL = 9


def _records(path: Path) -> Iterator[tuple[int, int, bytes, int]]:
    """(stamp in ns, original length, captured bytes, link type) of each record of a classic pcap."""
    with open(path, "rb") as handle:
        header = handle.read(24)
        if len(header) < 24:
            raise InputError(f"{path}: byte 0: expected a 24-byte pcap header")
        for order in ("<", ">"):
            magic, _, _, _, _, snaplen, linktype = struct.unpack(order + "IHHiIII", header)
            if magic in PCAP_MAGIC:
                break
        else:
            raise InputError(f"{path}: byte 0: not a classic pcap file (pcapng input is not annotated)")
        unit = PCAP_MAGIC[magic]
        record = struct.Struct(order + "IIII")
        offset = 24
        while chunk := handle.read(16):
            if len(chunk) < 16:
                raise InputError(f"{path}: byte {offset}: record header cut short")
            sec, frac, caplen, length = record.unpack(chunk)
            data = handle.read(caplen)
            if len(data) < caplen:
                raise InputError(f"{path}: byte {offset}: record cut short")
            yield sec * 1_000_000_000 + frac * unit, length, data, linktype
            offset += 16 + caplen


def frame_comments(run: Any) -> pd.Series:
    """One comment per data frame of the run's capture, indexed by frame number (1-based)."""
    frames = run.df_frames()
    data = frames[frames["payload_len"].to_numpy() > 0]
    name = (data["src"].astype(str) + ":" + data["sport"].astype(str) + ">" + data["dst"].astype(str) + ":"
            + data["dport"].astype(str))
    keyed = pd.DataFrame({"frame": data["frame"].to_numpy(), "stream": name.to_numpy(),
                          "t_ns": data["t_ns"].to_numpy()})
    tl = Timeline.of(run)
    streams = tl.df_streams().set_index("stream")
    segments = tl.df_segments()
    writes = (segments.groupby(["stream", "frame_t_ns"], sort=False)
              .agg(write_first=("write_id", "min"), write_last=("write_id", "max"),
                   retransmit=("retransmit", "max"))
              .reset_index().rename(columns={"frame_t_ns": "t_ns"}))
    keyed = keyed.merge(writes, on=["stream", "t_ns"], how="left")
    owner = streams.reindex(keyed["stream"].to_numpy())
    pids, roles = owner["sender_pid"].to_numpy(), owner["sender_role"].to_numpy()
    texts = []
    # One string per frame: formatting is per row whatever the library, so a plain loop over the
    # columns' values is as fast as any.
    for stream, pid, role, first, last, again in zip(keyed["stream"].to_numpy(), pids, roles,
                                                      keyed["write_first"].to_numpy(), keyed["write_last"].to_numpy(),
                                                      keyed["retransmit"].to_numpy()):
        owner_text = f"sender pid {int(pid)} ({role})" if pd.notna(pid) else "sender unknown"
        text = f"hostwire: stream {stream} {owner_text}"
        if pd.notna(first) and first >= 0:
            text += f" write {int(first)}" if first == last else f" writes {int(first)}-{int(last)}"
        if pd.notna(again) and bool(again):
            text += " retransmission"
        texts.append(text)
    return pd.Series(texts, index=keyed["frame"].to_numpy(), dtype=object)


def write_annotated(run: Any, out: Path) -> int:
    """Writes run's capture to `out` as annotated pcapng; returns the number of comments."""
    import dpkt.pcapng as pcapng

    comments = frame_comments(run)
    pcap = Path(run.path) / "raw" / "wire.pcap"
    written = 0
    try:
        with open(out, "wb") as handle:
            writer = None
            for number, (t_ns, length, data, linktype) in enumerate(_records(pcap), start=1):
                if writer is None:
                    idb = pcapng.InterfaceDescriptionBlockLE(
                        linktype=linktype, snaplen=65535,
                        opts=[pcapng.PcapngOptionLE(code=OPT_IF_TSRESOL, data=bytes([9])),
                              pcapng.PcapngOptionLE(code=pcapng.PCAPNG_OPT_ENDOFOPT)])
                    writer = pcapng.Writer(handle, snaplen=65535, linktype=linktype, idb=idb)
                opts = []
                text = comments.get(number)
                if isinstance(text, str):
                    opts.append(pcapng.PcapngOptionLE(code=pcapng.PCAPNG_OPT_COMMENT, text=text))
                    written += 1
                opts.append(pcapng.PcapngOptionLE(code=pcapng.PCAPNG_OPT_ENDOFOPT))
                block = pcapng.EnhancedPacketBlockLE(ts_high=t_ns >> 32, ts_low=t_ns & 0xFFFFFFFF, pkt_len=length,
                                                     pkt_data=data, opts=opts)
                writer.writepkt(block)
    except OSError as err:
        raise HostwireError(f"{out}: cannot write: {err.strerror}") from None
    return written
