from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest

from pipeline.ingest.pcapng_blocks import tsresol_factors
from pipeline.ingest.reader import CaptureReader
from pipeline.ingest.records import CaptureAnomaly, TcpPacket
from tests.support import pcapgen as g

DATA = Path(__file__).resolve().parents[2] / "data" / "captures"


def synthetic(messages: int = 4) -> g.SyntheticCapture:
    capture = g.generate([g.stomp_conversation(2, messages=messages, body_size=2000)])
    for n, packet in enumerate(capture.packets):
        packet.ts_ns += 1_000_000 * n + 123  # sub-microsecond digits
    return capture


def read(path: Path) -> tuple[list[TcpPacket], list[CaptureAnomaly], CaptureReader]:
    with CaptureReader(str(path)) as reader:
        items = list(reader)
    packets = [i for i in items if isinstance(i, TcpPacket)]
    anomalies = [i for i in items if isinstance(i, CaptureAnomaly)]
    return packets, anomalies, reader


def block_offsets(data: bytes, byte_order: str = "<") -> list[tuple[int, int]]:
    """(offset, type) of every block of a well-formed file."""
    out, off = [], 0
    while off < len(data):
        btype, blen = struct.unpack_from(byte_order + "II", data, off)
        out.append((off, btype))
        off += blen
    return out


def packet_blocks(data: bytes, byte_order: str = "<") -> list[int]:
    return [off for off, btype in block_offsets(data, byte_order) if btype in (2, 3, 6)]


@pytest.mark.parametrize("byte_order", ["<", ">"])
def test_two_interfaces_with_their_own_resolution(tmp_path: Path, byte_order: str) -> None:
    capture = synthetic()
    interfaces = [
        g.NgInterface(g.LINKTYPE_ETHERNET, tsresol=6, name="eth0"),
        g.NgInterface(g.LINKTYPE_LINUX_SLL2, tsresol=9, name="any"),
    ]
    path = g.write_pcapng(
        tmp_path / "two.pcapng",
        capture.packets,
        interfaces=interfaces,
        spread=True,
        byte_order=byte_order,
        comments=True,
    )
    packets, anomalies, reader = read(path)
    assert anomalies == [] and len(packets) == len(capture.packets)
    for n, (ours, synth) in enumerate(zip(packets, capture.packets, strict=True)):
        expected = synth.ts_ns if n % 2 else synth.ts_ns // 1000 * 1000
        assert ours.ts_ns == expected
    texts = [text for _off, text in reader.comments]
    assert "synthetic capture from tests/support/pcapgen.py" in texts and "interface any" in texts
    assert "packet 5" in texts


@pytest.mark.parametrize("tsresol", [3, 6, 9, 0x80 | 20, 0x80 | 30])
def test_timestamp_resolutions_and_offset(tmp_path: Path, tsresol: int) -> None:
    capture = synthetic(1)
    iface = g.NgInterface(tsresol=tsresol, tsoffset_s=1_000_000)
    path = g.write_pcapng(tmp_path / "r.pcapng", capture.packets, interfaces=[iface])
    packets, _, _ = read(path)
    mul, div = tsresol_factors(tsresol)
    unit_ns = mul / div
    for ours, synth in zip(packets, capture.packets, strict=True):
        assert 0 <= synth.ts_ns - ours.ts_ns < max(unit_ns, 1) + 1


def test_simple_packet_blocks(tmp_path: Path) -> None:
    capture = synthetic(1)
    path = g.write_pcapng(tmp_path / "spb.pcapng", capture.packets, simple=True)
    packets, anomalies, _ = read(path)
    assert anomalies == [] and len(packets) == len(capture.packets)
    assert {p.ts_ns for p in packets} == {0}  # no timestamps in SPBs


def test_simple_packet_blocks_respect_the_interface_snaplen(tmp_path: Path) -> None:
    capture = synthetic(1)
    iface = g.NgInterface(snaplen=100)
    path = g.write_pcapng(tmp_path / "spb.pcapng", capture.packets, simple=True, interfaces=[iface])
    packets, anomalies, reader = read(path)
    assert len(packets) == len(capture.packets)
    assert all(p.payload_len <= 100 - 54 for p in packets)
    assert reader.stats.snaplen_cut == len(anomalies) > 0


def test_several_sections_reset_the_interfaces(tmp_path: Path) -> None:
    capture = synthetic(1)
    half = len(capture.packets) // 2
    first = g.pcapng_bytes(capture.packets[:half], byte_order="<")
    second = g.pcapng_bytes(
        capture.packets[half:],
        byte_order=">",
        interfaces=[g.NgInterface(g.LINKTYPE_RAW, tsresol=9)],
    )
    path = tmp_path / "sections.pcapng"
    path.write_bytes(first + second)
    packets, anomalies, _ = read(path)
    assert anomalies == [] and len(packets) == len(capture.packets)
    assert [p.ts_ns for p in packets[half:]] == [p.ts_ns for p in capture.packets[half:]]


def test_corrupt_block_length_is_reported_and_the_next_block_found(tmp_path: Path) -> None:
    data = bytearray(g.pcapng_bytes(synthetic().packets))
    blocks = packet_blocks(bytes(data))
    bad = blocks[7]
    struct.pack_into("<I", data, bad + 4, 0x7FFF_FF00)
    path = tmp_path / "bad.pcapng"
    path.write_bytes(bytes(data))
    packets, anomalies, _ = read(path)
    assert [(a.kind, a.offset) for a in anomalies] == [("bad_block_length", bad)]
    assert [p.record_offset for p in packets] == blocks[:7] + blocks[8:]


def test_trailing_length_mismatch_is_corruption(tmp_path: Path) -> None:
    data = bytearray(g.pcapng_bytes(synthetic().packets))
    blocks = packet_blocks(bytes(data))
    bad = blocks[3]
    blen = struct.unpack_from("<I", data, bad + 4)[0]
    struct.pack_into("<I", data, bad + blen - 4, blen + 4)
    path = tmp_path / "trailer.pcapng"
    path.write_bytes(bytes(data))
    packets, anomalies, _ = read(path)
    assert [(a.kind, a.offset) for a in anomalies] == [("bad_block_length", bad)]
    assert len(packets) == len(blocks) - 1


def test_truncated_pcapng_keeps_complete_blocks(tmp_path: Path) -> None:
    data = g.pcapng_bytes(synthetic().packets)
    blocks = packet_blocks(data)
    path = tmp_path / "cut.pcapng"
    path.write_bytes(data[: blocks[-1] + 40])
    packets, anomalies, _ = read(path)
    assert [(a.kind, a.offset) for a in anomalies] == [("truncated_file", blocks[-1])]
    assert len(packets) == len(blocks) - 1


def test_unknown_link_type_interface_is_reported_and_others_flow(tmp_path: Path) -> None:
    capture = synthetic()
    interfaces = [g.NgInterface(g.LINKTYPE_ETHERNET), g.NgInterface(g.LINKTYPE_ETHERNET)]
    data = bytearray(g.pcapng_bytes(capture.packets, interfaces=interfaces, spread=True))
    idbs = [off for off, btype in block_offsets(bytes(data)) if btype == 1]
    struct.pack_into("<H", data, idbs[1] + 8, 147)  # second interface: LINKTYPE_USER0
    path = tmp_path / "u.pcapng"
    path.write_bytes(bytes(data))
    packets, anomalies, reader = read(path)
    assert [(a.kind, a.offset) for a in anomalies] == [("unknown_linktype", idbs[1])]
    assert len(packets) == (len(capture.packets) + 1) // 2
    assert reader.stats.non_tcp_packets == {"unknown_linktype": len(capture.packets) // 2}


def test_packet_of_an_undescribed_interface(tmp_path: Path) -> None:
    data = bytearray(g.pcapng_bytes(synthetic(1).packets))
    first = packet_blocks(bytes(data))[0]
    struct.pack_into("<I", data, first + 8, 5)
    path = tmp_path / "iface.pcapng"
    path.write_bytes(bytes(data))
    packets, anomalies, reader = read(path)
    assert [(a.kind, a.offset) for a in anomalies] == [("unknown_interface", first)]
    assert reader.stats.packets == len(packets) + 1


def test_real_dumpcap_capture() -> None:
    packets, anomalies, reader = read(DATA / "real_lo_dumpcap.pcapng")
    assert anomalies == [] and len(packets) == 84
    assert any(p.ts_ns % 1000 for p in packets)  # dumpcap writes nanosecond resolution
    assert reader.format == "pcapng"


def test_obsolete_packet_blocks(tmp_path: Path) -> None:
    capture = synthetic(1)
    data = bytearray(g.pcapng_bytes(capture.packets, interfaces=[g.NgInterface(tsresol=9)]))
    for off in packet_blocks(bytes(data)):
        struct.pack_into("<I", data, off, 2)  # EPB -> OPB: same layout with a 16-bit interface
    path = tmp_path / "opb.pcapng"
    path.write_bytes(bytes(data))
    packets, anomalies, _ = read(path)
    assert anomalies == []
    assert [p.ts_ns for p in packets] == [p.ts_ns for p in capture.packets]


@pytest.mark.parametrize("block_type", [6, 2], ids=["enhanced", "obsolete"])
def test_a_time_no_int64_nanosecond_column_can_hold_is_reported_and_skipped(
    tmp_path: Path, block_type: int
) -> None:
    capture = synthetic(1)
    data = bytearray(g.pcapng_bytes(capture.packets))
    blocks = packet_blocks(bytes(data))
    for off in blocks:
        struct.pack_into("<I", data, off, block_type)
    struct.pack_into("<I", data, blocks[2] + 12, 0xFFFFFFFF)  # microseconds: ~584,000 years
    path = tmp_path / "far-future.pcapng"
    path.write_bytes(bytes(data))
    packets, anomalies, reader = read(path)
    assert [(a.kind, a.offset) for a in anomalies] == [("bad_timestamp", blocks[2])]
    assert len(packets) == len(capture.packets) - 1
    assert all(0 <= p.ts_ns < 2**63 for p in packets)
    assert reader.stats.packets == len(capture.packets)
    assert reader.stats.non_tcp_packets == {"bad_timestamp": 1}


def test_a_negative_interface_offset_is_a_bad_timestamp(tmp_path: Path) -> None:
    capture = synthetic(1)
    data = g.pcapng_bytes(capture.packets, interfaces=[g.NgInterface(tsoffset_s=1)])
    option = struct.pack("<HHq", 14, 8, 1)  # if_tsoffset: 1 s
    assert data.count(option) == 1
    data = data.replace(option, struct.pack("<HHq", 14, 8, -2_000_000_000))  # before 1970
    path = tmp_path / "before-1970.pcapng"
    path.write_bytes(data)
    packets, anomalies, _ = read(path)
    assert packets == []
    assert {a.kind for a in anomalies} == {"bad_timestamp"}
    assert len(anomalies) == len(capture.packets)


def test_interfaces_per_section_are_capped_and_cost_linear_time(tmp_path: Path) -> None:
    # Every interface description used to rebuild the reader's per-interface tables, and any
    # number of them was kept: a file of IDBs cost quadratic time and unbounded memory.
    from pipeline.ingest.pcapng_blocks import MAX_INTERFACES

    capture = synthetic(1)
    data = g.pcapng_bytes(capture.packets)
    idb = struct.pack("<IIHHII", 1, 20, 1, 0, 0, 20)  # Ethernet, no options
    first_epb = packet_blocks(data)[0]
    extra = 2_000
    flooded = data[:first_epb] + idb * (MAX_INTERFACES + extra) + data[first_epb:]
    path = tmp_path / "idb-flood.pcapng"
    path.write_bytes(flooded)
    started = time.monotonic()
    packets, anomalies, _ = read(path)
    assert time.monotonic() - started < 20
    assert len(packets) == len(capture.packets)
    assert {a.kind for a in anomalies} == {"too_many_interfaces"}
    assert len(anomalies) == extra + 1  # the generated file's own IDB counts too
