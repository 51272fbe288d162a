from __future__ import annotations

import struct
from pathlib import Path

import pytest

from pipeline.ingest.pcap import PcapHeader, parse_pcap_header
from pipeline.ingest.reader import CaptureReader
from pipeline.ingest.records import CaptureAnomaly, TcpPacket
from tests.support import pcapgen as g

DATA = Path(__file__).resolve().parents[2] / "data" / "captures"


def synthetic(messages: int = 4) -> g.SyntheticCapture:
    conv = g.stomp_conversation(1, messages=messages, body_size=2000)
    capture = g.generate([conv])
    for n, packet in enumerate(capture.packets):  # sub-microsecond digits to tell flavours apart
        packet.ts_ns += 1_000_000 * n + 123
    return capture


def read(path: Path) -> tuple[list[TcpPacket], list[CaptureAnomaly], CaptureReader]:
    with CaptureReader(str(path)) as reader:
        items = list(reader)
    packets = [i for i in items if isinstance(i, TcpPacket)]
    anomalies = [i for i in items if isinstance(i, CaptureAnomaly)]
    return packets, anomalies, reader


def record_offsets(data: bytes, header_len: int = 16, byte_order: str = "<") -> list[int]:
    offsets, off = [], 24
    while off + header_len <= len(data):
        offsets.append(off)
        off += header_len + struct.unpack_from(byte_order + "I", data, off + 8)[0]
    return offsets


@pytest.mark.parametrize("byte_order", ["<", ">"])
@pytest.mark.parametrize("nanos", [False, True])
def test_both_flavours_and_byte_orders(tmp_path: Path, byte_order: str, nanos: bool) -> None:
    capture = synthetic()
    path = g.write_pcap(tmp_path / "x.pcap", capture.packets, nanos=nanos, byte_order=byte_order)
    packets, anomalies, reader = read(path)
    assert anomalies == []
    assert len(packets) == len(capture.packets)
    for ours, synth in zip(packets, capture.packets, strict=True):
        expected = synth.ts_ns if nanos else synth.ts_ns // 1000 * 1000
        assert ours.ts_ns == expected
    assert reader.format == "pcap"
    assert reader.stats.packets == reader.stats.tcp_packets == len(capture.packets)


def test_header_parsing_masks_fcs_bits_and_reads_snaplen(tmp_path: Path) -> None:
    data = bytearray(g.pcap_bytes(synthetic(1).packets, snaplen=65535))
    struct.pack_into("<I", data, 20, 0x1000_0000 | 0x0004_0000 | 1)  # FCS present + reserved
    header = parse_pcap_header(bytes(data), len(data))
    assert header == PcapHeader("<", False, 1, 65535, 16)
    path = tmp_path / "fcs.pcap"
    path.write_bytes(bytes(data))
    packets, anomalies, _ = read(path)
    assert anomalies == [] and packets


def test_modified_pcap_records_with_extra_fields(tmp_path: Path) -> None:
    plain = g.pcap_bytes(synthetic(1).packets)
    out = bytearray(plain[:24])
    struct.pack_into("<I", out, 0, 0xA1B2CD34)
    for off in record_offsets(plain):
        incl = struct.unpack_from("<I", plain, off + 8)[0]
        out += plain[off : off + 16] + struct.pack("<iHBx", 1, 0x0800, 0)
        out += plain[off + 16 : off + 16 + incl]
    path = tmp_path / "modified.pcap"
    path.write_bytes(bytes(out))
    packets, anomalies, _ = read(path)
    assert anomalies == [] and len(packets) == len(record_offsets(plain))


def test_truncated_file_keeps_every_complete_record(tmp_path: Path) -> None:
    data = g.pcap_bytes(synthetic().packets)
    offsets = record_offsets(data)
    path = tmp_path / "cut.pcap"
    path.write_bytes(data[: offsets[-1] + 30])  # last record cut inside its data
    packets, anomalies, _ = read(path)
    assert len(packets) == len(offsets) - 1
    assert [(a.kind, a.offset) for a in anomalies] == [("truncated_file", offsets[-1])]
    path.write_bytes(data[: offsets[-1] + 9])  # cut inside the record header
    packets, anomalies, _ = read(path)
    assert [(a.kind, a.offset) for a in anomalies] == [("truncated_file", offsets[-1])]
    assert len(packets) == len(offsets) - 1


def test_huge_record_length_is_reported_and_reading_resumes(tmp_path: Path) -> None:
    data = bytearray(g.pcap_bytes(synthetic().packets))
    offsets = record_offsets(bytes(data))
    bad = offsets[10]
    struct.pack_into("<I", data, bad + 8, 0x7FFF_FFF0)  # incl_len
    path = tmp_path / "huge.pcap"
    path.write_bytes(bytes(data))
    packets, anomalies, reader = read(path)
    assert [(a.kind, a.offset) for a in anomalies] == [("bad_record_length", bad)]
    assert "resumed at" in anomalies[0].detail
    assert [p.record_offset for p in packets] == offsets[:10] + offsets[11:]
    assert reader.stats.anomalies == {"bad_record_length": 1}


def test_garbage_in_the_middle_is_skipped(tmp_path: Path) -> None:
    data = g.pcap_bytes(synthetic().packets)
    offsets = record_offsets(data)
    cut = offsets[5] + 20
    path = tmp_path / "garbage.pcap"
    path.write_bytes(data[:cut] + b"\xde\xad\xbe\xef" * 300 + data[offsets[6] :])
    packets, anomalies, _ = read(path)
    assert [a.kind for a in anomalies] == ["bad_record_length"]
    assert anomalies[0].offset == offsets[6]  # record 5 now swallows the start of the garbage
    assert len(packets) == len(offsets) - 1


def test_corrupt_first_record_resyncs_without_a_timestamp(tmp_path: Path) -> None:
    data = bytearray(g.pcap_bytes(synthetic().packets))
    offsets = record_offsets(bytes(data))
    struct.pack_into("<I", data, 24 + 12, 5)  # orig_len below incl_len
    path = tmp_path / "first.pcap"
    path.write_bytes(bytes(data))
    packets, anomalies, _ = read(path)
    assert [(a.kind, a.offset) for a in anomalies] == [("bad_record_length", 24)]
    assert [p.record_offset for p in packets] == offsets[1:]


def test_record_longer_than_the_announced_snaplen_is_kept_when_the_next_lines_up(
    tmp_path: Path,
) -> None:
    data = bytearray(g.pcap_bytes(synthetic().packets))
    struct.pack_into("<I", data, 16, 100)  # snaplen 100 but the records hold up to 1514
    path = tmp_path / "snaplen.pcap"
    path.write_bytes(bytes(data))
    packets, anomalies, _ = read(path)
    assert anomalies == [] and len(packets) == len(record_offsets(bytes(data)))


def test_snaplen_cut_packets_are_yielded_and_reported(tmp_path: Path) -> None:
    path = g.write_pcap(tmp_path / "s.pcap", synthetic().packets, snaplen=120)
    packets, anomalies, reader = read(path)
    cut = [p for p in packets if p.payload_len < p.wire_len]
    assert cut and all(p.payload_len == 120 - 54 for p in cut)
    assert [a.offset for a in anomalies] == [p.record_offset for p in cut]
    assert {a.kind for a in anomalies} == {"snaplen_cut"}
    assert reader.stats.snaplen_cut == len(cut)


def test_unknown_link_type_is_reported_once_and_counted(tmp_path: Path) -> None:
    path = g.write_pcap(tmp_path / "u.pcap", synthetic(1).packets)
    data = bytearray(path.read_bytes())
    struct.pack_into("<I", data, 20, 147)
    path.write_bytes(bytes(data))
    packets, anomalies, reader = read(path)
    assert packets == []
    assert [(a.kind, a.offset) for a in anomalies] == [("unknown_linktype", 20)]
    assert reader.stats.non_tcp_packets == {"unknown_linktype": reader.stats.packets}
    assert reader.stats.packets == len(record_offsets(bytes(data)))


def test_non_tcp_packets_are_counted_and_skipped(tmp_path: Path) -> None:
    packets = synthetic(1).packets
    noise = [g.udp_packet(1, "10.0.0.1", "10.0.0.2"), g.arp_packet(2), g.fragment_packet(3)]
    path = g.write_pcap(tmp_path / "n.pcap", noise + packets)
    tcp, anomalies, reader = read(path)
    assert anomalies == [] and len(tcp) == len(packets)
    assert reader.stats.non_tcp_packets == {"not_tcp": 1, "non_ip": 1, "ip_fragment": 1}
    stats = reader.stats
    assert stats.packets == stats.tcp_packets + sum(stats.non_tcp_packets.values())


def test_real_nanosecond_capture_keeps_nanoseconds() -> None:
    packets, anomalies, _ = read(DATA / "real_lo_nanos.pcap")
    assert anomalies == [] and len(packets) == 84
    assert any(p.ts_ns % 1000 for p in packets)


def test_real_snaplen_capture_reports_every_cut_packet() -> None:
    packets, anomalies, reader = read(DATA / "real_lo_snaplen96.pcap")
    cut = [p for p in packets if p.payload_len < p.wire_len]
    assert len(cut) == reader.stats.snaplen_cut == len(anomalies) == 31
