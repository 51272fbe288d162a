from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import dpkt
import pytest

from capture import pcapng
from pipeline.ingest import CaptureAnomaly, CaptureReader, TcpPacket
from pipeline.ingest.pcapng_blocks import EPB, IDB, SHB


def _blocks(data: bytes) -> list[tuple[int, bytes]]:
    """(type, body) of every block, checking both length fields and 4-byte alignment."""
    out = []
    pos = 0
    while pos < len(data):
        block_type, total = struct.unpack_from("<II", data, pos)
        assert total % 4 == 0
        assert struct.unpack_from("<I", data, pos + total - 4)[0] == total
        out.append((block_type, data[pos + 8 : pos + total - 4]))
        pos += total
    assert pos == len(data)
    return out


def _tcp_frame(payload: bytes) -> bytes:
    tcp = dpkt.tcp.TCP(sport=40000, dport=61613, seq=1, ack=1, flags=0x18, data=payload)
    ip = dpkt.ip.IP(src=b"\x7f\x00\x00\x01", dst=b"\x7f\x00\x00\x02", p=6, data=tcp)
    ip.len = len(bytes(ip))
    eth = dpkt.ethernet.Ethernet(
        src=b"\x02" * 6, dst=b"\x04" * 6, type=dpkt.ethernet.ETH_TYPE_IP, data=ip
    )
    return bytes(eth)


def test_option_values_are_padded_and_terminated() -> None:
    encoded = pcapng.encode_options([(pcapng.OPT_COMMENT, b"abcde")])
    assert encoded == struct.pack("<HH", 1, 5) + b"abcde\0\0\0" + struct.pack("<HH", 0, 0)
    assert pcapng.encode_options([]) == b""


def test_file_header_is_a_section_and_a_nanosecond_ethernet_interface() -> None:
    blocks = _blocks(pcapng.file_header(comment="hello"))
    assert [kind for kind, _ in blocks] == [SHB, IDB]
    shb = blocks[0][1]
    assert struct.unpack_from("<IHHq", shb) == (0x1A2B3C4D, 1, 0, -1)
    assert b"hello" in shb and b"stomp-capture" in shb
    idb = blocks[1][1]
    assert struct.unpack_from("<HHI", idb) == (pcapng.LINKTYPE_ETHERNET, 0, 0)
    assert struct.pack("<HH", pcapng.OPT_TSRESOL, 1) + b"\x09\0\0\0" in idb


@pytest.mark.parametrize("size", [0, 1, 2, 3, 4, 1461])
def test_enhanced_packet_block_splits_nanoseconds_and_pads(size: int) -> None:
    ts = 1_700_000_000_123_456_789
    packet = bytes(range(256)) * 6
    packet = packet[:size]
    block = pcapng.enhanced_packet_block(ts, packet, comment="c" if size % 2 else "")
    [(kind, body)] = _blocks(block)
    assert kind == EPB
    iface, high, low, captured, original = struct.unpack_from("<IIIII", body)
    assert (iface, (high << 32) | low, captured, original) == (0, ts, size, size)
    assert body[20 : 20 + size] == packet


def test_parts_are_the_same_bytes_without_copying_the_payload() -> None:
    payload = memoryview(b"x" * 1000)
    parts = pcapng.enhanced_packet_block_parts(5, (b"head", payload))
    assert parts[2] is payload
    assert b"".join(parts) == pcapng.enhanced_packet_block(5, b"head" + bytes(payload))


def _write_sample(path: Path, payloads: list[bytes], ts0: int) -> None:
    with path.open("wb") as f:
        f.write(pcapng.file_header())
        for i, payload in enumerate(payloads):
            f.write(pcapng.enhanced_packet_block(ts0 + i, _tcp_frame(payload), comment=f"n{i}"))


def test_pipeline_reader_and_dpkt_read_the_blocks_back(tmp_path: Path) -> None:
    path = tmp_path / "sample.pcapng"
    payloads = [b"CONNECT\n\n\0", b"", b"abc", b"z" * 3000]
    ts0 = 1_700_000_000_000_000_001
    _write_sample(path, payloads, ts0)

    with CaptureReader(str(path)) as reader:
        events = list(reader)
        assert not [e for e in events if isinstance(e, CaptureAnomaly)]
        packets = [e for e in events if isinstance(e, TcpPacket)]
        assert [reader.payload(p) for p in packets] == payloads
        assert [p.ts_ns for p in packets] == [ts0 + i for i in range(len(payloads))]
        assert [text for _, text in reader.comments] == ["n0", "n1", "n2", "n3"]

    with path.open("rb") as f:
        read = [(ts, buf) for ts, buf in dpkt.pcapng.Reader(f)]
    assert [dpkt.ethernet.Ethernet(buf).data.data.data for _, buf in read] == payloads


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark (Debian package) missing")
def test_tshark_reads_nanosecond_times(tmp_path: Path) -> None:
    path = tmp_path / "sample.pcapng"
    ts0 = 1_700_000_000_123_456_789
    _write_sample(path, [b"hello"], ts0)
    out = subprocess.run(
        ["tshark", "-r", str(path), "-T", "fields", "-e", "frame.time_epoch", "-e", "tcp.len"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split() == ["1700000000.123456789", "5"]
