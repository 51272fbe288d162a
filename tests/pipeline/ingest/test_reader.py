from __future__ import annotations

import gzip
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pipeline.ingest import CaptureAnomaly, CaptureReader, TcpPacket, iter_capture, split_capture
from tests.support import pcapgen as g

DATA = Path(__file__).resolve().parents[2] / "data" / "captures"
REAL = sorted(DATA.glob("real_*.pcap*"))
TSHARK = shutil.which("tshark")


def only_anomalies(path: Path) -> list[tuple[str, int]]:
    items = list(iter_capture(str(path)))
    anomalies = [i for i in items if isinstance(i, CaptureAnomaly)]
    assert anomalies == items
    return [(i.kind, i.offset) for i in anomalies]


def test_garbage_empty_missing_and_compressed_files_are_anomalies(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.pcap"
    garbage.write_bytes(b"this is not a capture at all" * 50)
    assert only_anomalies(garbage) == [("unknown_format", 0)]
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(b"")
    assert only_anomalies(empty) == [("truncated_file", 0)]
    assert only_anomalies(tmp_path / "missing.pcap") == [("unreadable_file", 0)]
    header_only = tmp_path / "short.pcap"
    header_only.write_bytes(g.pcap_bytes([])[:10])
    assert only_anomalies(header_only) == [("truncated_file", 0)]
    packed = tmp_path / "x.pcap.gz"
    packed.write_bytes(gzip.compress(g.pcap_bytes([])))
    [anomaly] = list(iter_capture(str(packed)))
    assert isinstance(anomaly, CaptureAnomaly)
    assert anomaly.kind == "unknown_format" and "gzip" in anomaly.detail


def test_payload_reads_the_bytes_from_the_file(tmp_path: Path) -> None:
    conv = g.stomp_conversation(0, messages=2, body_size=500)
    path = g.write_pcap(tmp_path / "p.pcap", g.generate([conv]).packets)
    sent = b""
    with CaptureReader(str(path)) as reader:
        for item in reader:
            if isinstance(item, TcpPacket) and item.src_port == conv.client[1]:
                sent += reader.payload(item)
    assert sent == g.stream_bytes(conv, True)


def test_header_only_file_has_no_packets(tmp_path: Path) -> None:
    path = g.write_pcap(tmp_path / "h.pcap", [])
    with CaptureReader(str(path)) as reader:
        assert list(reader) == []
    assert reader.stats.packets == 0


@pytest.mark.parametrize("path", REAL, ids=[p.name for p in REAL])
def test_real_captures_read_without_anomalies(path: Path) -> None:
    with CaptureReader(str(path)) as reader:
        items = list(reader)
    anomalies = [i for i in items if isinstance(i, CaptureAnomaly)]
    assert len(items) - len(anomalies) == 84
    assert all(a.kind == "snaplen_cut" for a in anomalies)
    stats = reader.stats
    assert stats.packets == stats.tcp_packets == 84


@pytest.mark.skipif(TSHARK is None, reason="tshark is not installed")
@pytest.mark.parametrize("path", REAL, ids=[p.name for p in REAL])
def test_real_captures_match_tshark_fields(path: Path) -> None:
    fields = ["frame.time_epoch", "ip.src", "ipv6.src", "tcp.srcport", "tcp.dstport"]
    fields += ["tcp.seq_raw", "tcp.ack_raw", "tcp.flags", "tcp.window_size_value", "tcp.len"]
    assert TSHARK is not None  # skipped otherwise
    command = [TSHARK, "-r", str(path), "-T", "fields"]
    for field in fields:
        command += ["-e", field]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    expected = []
    for line in out.splitlines():
        epoch, ip4, ip6, sport, dport, seq, ack, flags, window, size = line.split("\t")
        seconds, fraction = epoch.split(".")
        ts_ns = int(seconds) * 10**9 + int(fraction.ljust(9, "0")[:9])
        expected.append(
            (
                ts_ns,
                ip4 or ip6,
                int(sport),
                int(dport),
                int(seq),
                int(ack),
                int(flags, 16),
                int(window),
                int(size),
            )
        )
    ours = [
        (p.ts_ns, p.src_ip, p.src_port, p.dst_port, p.seq, p.ack, p.flags, p.window, p.wire_len)
        for p in iter_capture(str(path))
        if isinstance(p, TcpPacket)
    ]
    assert ours == expected


_SMALL = g.generate([g.stomp_conversation(5, messages=2, body_size=700)]).packets
_FILES = {
    "pcap": g.pcap_bytes(_SMALL, nanos=True),
    "pcap_be": g.pcap_bytes(_SMALL, byte_order=">", linktype=g.LINKTYPE_LINUX_SLL2),
    "pcapng": g.pcapng_bytes(
        _SMALL, interfaces=[g.NgInterface(tsresol=9), g.NgInterface(101)], spread=True
    ),
    "pcapng_be": g.pcapng_bytes(_SMALL, byte_order=">", comments=True),
}


@settings(max_examples=250, deadline=None)
@given(
    name=st.sampled_from(sorted(_FILES)),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=6),
    cut=st.one_of(st.none(), st.integers(0, 10**6)),
    split_at=st.integers(1, 5000),
)
# An unknown link type was reported by both the header-only split and the first record's one.
@example(name="pcap", flips=[(20, 2)], cut=None, split_at=1)
def test_damaged_files_never_raise_and_splits_agree(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    flips: list[tuple[int, int]],
    cut: int | None,
    split_at: int,
) -> None:
    data = bytearray(_FILES[name])
    for at, value in flips:
        data[at % len(data)] = value
    if cut is not None:
        del data[cut % len(data) :]
    path = tmp_path_factory.mktemp("fuzz") / name
    path.write_bytes(bytes(data))
    whole = list(iter_capture(str(path)))
    assert all(isinstance(i, (TcpPacket, CaptureAnomaly)) for i in whole)
    pieces = []
    for split in split_capture(str(path), split_at):
        with CaptureReader.from_split(split) as reader:
            pieces += list(reader)
    assert pieces == whole
