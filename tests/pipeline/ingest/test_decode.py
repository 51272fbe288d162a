from __future__ import annotations

import struct

import dpkt
import pytest

from pipeline.ingest import decode
from pipeline.ingest.records import CaptureAnomaly, CaptureStats, TcpPacket
from tests.support import pcapgen as g

PREFIX = b"\xee" * 7  # decoders work on absolute offsets inside a bigger buffer
CLIENT, SERVER = ("10.0.0.1", 40000), ("10.0.0.2", 61613)

GENERAL = {
    g.LINKTYPE_NULL: decode.decode_null,
    g.LINKTYPE_LOOP: decode.decode_null,
    g.LINKTYPE_ETHERNET: decode.decode_ethernet,
    g.LINKTYPE_RAW: decode.decode_raw,
    g.LINKTYPE_RAW_OPENBSD: decode.decode_raw,
    g.LINKTYPE_RAW_BSDOS: decode.decode_raw,
    g.LINKTYPE_LINUX_SLL: decode.decode_sll,
    g.LINKTYPE_LINUX_SLL2: decode.decode_sll2,
}


def tcp_packet(
    payload: bytes = b"SEND\n\n\0",
    src: tuple[str, int] = CLIENT,
    dst: tuple[str, int] = SERVER,
    conv: g.Conversation | None = None,
    tcp_options: bytes = b"",
) -> g.SynthPacket:
    tcp = g.tcp_segment(src[1], dst[1], 111, 222, g.PSH | g.ACK, payload, tcp_options, 4096)
    ip, ethertype = g.ip_datagram(src[0], dst[0], tcp, 1, conv)
    return g.SynthPacket(0, ip, ethertype)


def run(linktype: int, frame: bytes, caplen: int | None = None):
    buf = PREFIX + frame
    return GENERAL[linktype](buf, len(PREFIX), len(frame) if caplen is None else caplen, 5, 3)


def payload_of(frame: bytes, result: TcpPacket) -> bytes:
    buf = PREFIX + frame
    return buf[result.payload_offset : result.payload_offset + result.payload_len]


@pytest.mark.parametrize("linktype", sorted(GENERAL))
@pytest.mark.parametrize("family", ["ipv4", "ipv6"])
def test_every_link_type_yields_the_tcp_fields(linktype: int, family: str) -> None:
    src, dst = (CLIENT, SERVER) if family == "ipv4" else (("fd00::1", 40000), ("fd00::2", 61613))
    frame = g.carried_frame(tcp_packet(b"hello", src, dst), linktype)
    result = run(linktype, frame)
    assert isinstance(result, TcpPacket)
    assert (result.src_ip, result.src_port, result.dst_ip, result.dst_port) == (*src, *dst)
    assert (result.seq, result.ack, result.flags, result.window) == (111, 222, 0x18, 4096)
    assert (result.ts_ns, result.record_offset) == (5, 3)
    assert result.payload_len == result.wire_len == 5
    assert payload_of(frame, result) == b"hello"


@pytest.mark.parametrize("vlans", [(100,), (10, 20), (1, 2, 3)])
def test_ethernet_vlan_and_qinq_tags_are_skipped(vlans: tuple[int, ...]) -> None:
    frame = g.carried_frame(tcp_packet(b"tagged"), g.LINKTYPE_ETHERNET, vlans=vlans)
    result = run(g.LINKTYPE_ETHERNET, frame)
    assert isinstance(result, TcpPacket) and payload_of(frame, result) == b"tagged"


def test_ipv4_options_and_tcp_options_move_the_payload() -> None:
    conv = g.Conversation(CLIENT, SERVER, [], ip_options=b"\x94\x04\x00\x00" + b"\x01" * 4)
    options = b"\x02\x04\x05\xb4\x01\x01\x08\x0a" + b"\x00" * 8  # MSS, NOPs, timestamps
    frame = g.carried_frame(
        tcp_packet(b"opts", conv=conv, tcp_options=options), g.LINKTYPE_ETHERNET
    )
    result = run(g.LINKTYPE_ETHERNET, frame)
    assert isinstance(result, TcpPacket)
    assert result.payload_offset == len(PREFIX) + 14 + 28 + 36
    assert payload_of(frame, result) == b"opts"


def test_ipv6_extension_headers_are_walked() -> None:
    conv = g.Conversation(("fd00::1", 1), ("fd00::2", 2), [], ipv6_extension=True)
    frame = g.carried_frame(
        tcp_packet(b"v6ext", ("fd00::1", 1), ("fd00::2", 2), conv), g.LINKTYPE_RAW
    )
    result = run(g.LINKTYPE_RAW, frame)
    assert isinstance(result, TcpPacket) and payload_of(frame, result) == b"v6ext"


def test_ipv6_addresses_are_compressed_text() -> None:
    src, dst = ("2001:db8:0:0:0:0:0:1", 5), ("2001:0db8::ff00:42:8329", 6)
    frame = g.carried_frame(tcp_packet(b"x", src, dst), g.LINKTYPE_RAW)
    result = run(g.LINKTYPE_RAW, frame)
    assert (result.src_ip, result.dst_ip) == ("2001:db8::1", "2001:db8::ff00:42:8329")


def test_ipv4_and_ipv6_fragments_are_not_tcp() -> None:
    v4 = g.carried_frame(g.fragment_packet(0), g.LINKTYPE_ETHERNET)
    assert run(g.LINKTYPE_ETHERNET, v4) == "ip_fragment"
    tcp = g.tcp_segment(1, 2, 0, 0, g.ACK, b"")
    frag_header = struct.pack("!BBHI", 6, 0, 1, 99)  # offset 0, more fragments
    v6 = struct.pack("!IHBB16s16s", 6 << 28, 8 + len(tcp), 44, 64, b"\0" * 16, b"\0" * 16)
    assert run(g.LINKTYPE_RAW, v6 + frag_header + tcp) == "ip_fragment"


def test_other_protocols_are_counted_by_reason() -> None:
    assert run(
        g.LINKTYPE_ETHERNET, g.carried_frame(g.udp_packet(0, *("10.0.0.1", "10.0.0.2")), 1)
    ) == ("not_tcp")
    assert run(g.LINKTYPE_ETHERNET, g.carried_frame(g.arp_packet(0), 1)) == "non_ip"
    assert run(g.LINKTYPE_LINUX_SLL2, g.carried_frame(g.arp_packet(0), 276)) == "non_ip"


def test_malformed_headers_are_anomalies_with_offsets() -> None:
    good = g.carried_frame(tcp_packet(b"abc"), g.LINKTYPE_ETHERNET)
    bad_ip = good[:14] + b"\x43" + good[15:]  # IHL 3
    result = run(g.LINKTYPE_ETHERNET, bad_ip)
    assert isinstance(result, CaptureAnomaly)
    assert (result.kind, result.offset) == ("bad_ip_header", len(PREFIX) + 14)
    bad_tcp = bytearray(good)
    bad_tcp[14 + 20 + 12] = 0x20  # data offset 2 words
    result = run(g.LINKTYPE_ETHERNET, bytes(bad_tcp))
    assert isinstance(result, CaptureAnomaly)
    assert (result.kind, result.offset) == ("bad_tcp_header", len(PREFIX) + 34)


def test_ethernet_padding_is_not_payload() -> None:
    frame = g.carried_frame(tcp_packet(b""), g.LINKTYPE_ETHERNET)
    assert len(frame) == 60  # 54 bytes of headers padded to the minimum frame
    result = run(g.LINKTYPE_ETHERNET, frame)
    assert result.payload_len == result.wire_len == 0


def test_tso_zero_total_length_takes_the_captured_length() -> None:
    frame = bytearray(g.carried_frame(tcp_packet(b"x" * 3000), g.LINKTYPE_RAW))
    frame[2:4] = b"\0\0"
    result = run(g.LINKTYPE_RAW, bytes(frame))
    assert result.payload_len == result.wire_len == 3000


def test_cut_payload_keeps_the_wire_length() -> None:
    frame = g.carried_frame(tcp_packet(b"y" * 500), g.LINKTYPE_ETHERNET)
    result = run(g.LINKTYPE_ETHERNET, frame, caplen=96)
    assert (result.payload_len, result.wire_len) == (96 - 54, 500)


def test_cut_inside_the_headers_is_its_own_reason() -> None:
    frame = g.carried_frame(tcp_packet(b"y" * 500), g.LINKTYPE_ETHERNET)
    assert run(g.LINKTYPE_ETHERNET, frame, caplen=40) == decode.CUT
    assert run(g.LINKTYPE_ETHERNET, frame, caplen=10) == decode.CUT


def test_null_link_in_either_host_byte_order() -> None:
    ip = tcp_packet(b"bsd").ip
    for header in (struct.pack("<I", 2), struct.pack(">I", 2)):
        result = run(g.LINKTYPE_NULL, header + ip)
        assert isinstance(result, TcpPacket) and payload_of(header + ip, result) == b"bsd"
    assert run(g.LINKTYPE_NULL, struct.pack("<I", 7) + ip) == "non_ip"


def test_fields_match_dpkt_on_a_generated_capture() -> None:
    conv = g.stomp_conversation(3, messages=3, tcp_options=b"\x01\x01\x08\x0a" + b"\0" * 8)
    capture = g.generate([conv], g.Perturbation(shuffle=4, duplicate=0.3, seed=2))
    checked = 0
    for synth in capture.packets:
        frame = g.carried_frame(synth, g.LINKTYPE_ETHERNET)
        ours = run(g.LINKTYPE_ETHERNET, frame)
        tcp = dpkt.ethernet.Ethernet(frame).data.data
        assert (ours.src_port, ours.dst_port, ours.seq, ours.ack) == (
            tcp.sport,
            tcp.dport,
            tcp.seq,
            tcp.ack,
        )
        assert (ours.flags, ours.window) == (tcp.flags, tcp.win)
        assert payload_of(frame, ours) == tcp.data
        checked += 1
    assert checked == len(capture.packets) > 20


def test_settle_counts_and_reports_cuts() -> None:
    stats = CaptureStats()
    frame = g.carried_frame(tcp_packet(b"z" * 100), g.LINKTYPE_ETHERNET)
    cut = run(g.LINKTYPE_ETHERNET, frame, caplen=80)
    out = decode.settle(cut, 80, len(frame), 3, stats)
    assert out[0] is cut
    assert isinstance(out[1], CaptureAnomaly)
    assert (out[1].kind, out[1].offset) == ("snaplen_cut", 3)
    short = decode.settle(cut, 80, 80, 3, stats)  # frame complete but IP says more
    assert isinstance(short[1], CaptureAnomaly)
    assert short[1].kind == "short_packet"
    assert decode.settle("not_tcp", 60, 60, 9, stats) == []
    headers = decode.settle(decode.CUT, 20, 60, 9, stats)
    assert all(isinstance(a, CaptureAnomaly) for a in headers)
    assert [a.kind for a in headers if isinstance(a, CaptureAnomaly)] == ["snaplen_cut"]
    assert decode.settle(None, 60, 60, 9, stats) == []
    assert stats.tcp_packets == 2 and stats.snaplen_cut == 2
    assert stats.non_tcp_packets == {"not_tcp": 1, "headers_cut": 1, "unknown_linktype": 1}
    assert stats.anomalies == {"snaplen_cut": 2, "short_packet": 1}
