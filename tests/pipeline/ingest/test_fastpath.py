from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.ingest.fastpath import DECODERS, GENERAL_DECODERS, decoder_for
from pipeline.ingest.records import TcpPacket
from tests.support import pcapgen as g

LINKS = [lt for lt in g.ALL_LINKTYPES if lt in DECODERS]


@st.composite
def frames(draw: st.DrawFn) -> tuple[int, bytes, int]:
    linktype = draw(st.sampled_from(LINKS + [g.LINKTYPE_IPV4, g.LINKTYPE_IPV6]))
    ipv6 = linktype == g.LINKTYPE_IPV6 or (linktype != g.LINKTYPE_IPV4 and draw(st.booleans()))
    src, dst = ("fd00::1", "fd00::2") if ipv6 else ("10.0.0.1", "10.0.0.2")
    conv = g.Conversation(
        (src, 1),
        (dst, 2),
        [],
        ip_options=draw(st.sampled_from([b"", b"\x01\x01\x01\x00"])),
        ipv6_extension=draw(st.booleans()),
    )
    payload = draw(st.binary(max_size=300))
    options = draw(st.sampled_from([b"", b"\x02\x04\x05\xb4", b"\x01" * 12]))
    kind = draw(st.sampled_from(["tcp", "tcp", "tcp", "udp", "fragment"]))
    if kind == "tcp":
        tcp = g.tcp_segment(draw(st.integers(0, 65535)), 2, 7, 8, g.ACK, payload, options)
        ip, ethertype = g.ip_datagram(src, dst, tcp, 1, conv)
        packet = g.SynthPacket(0, ip, ethertype)
    elif kind == "udp":
        packet = g.udp_packet(0, src, dst, payload)
    else:
        packet = g.fragment_packet(0)
    vlans = draw(st.sampled_from([(), (5,), (5, 6)])) if linktype == g.LINKTYPE_ETHERNET else ()
    frame = g.frame(packet, linktype, vlans=vlans)
    if frame is None:  # e.g. IPv4 on the IPv6-only link type
        frame = b""
    if draw(st.booleans()):  # damage a byte of the headers
        damaged = bytearray(frame)
        if damaged:
            at = draw(st.integers(0, min(len(damaged), 80) - 1))
            damaged[at] = draw(st.integers(0, 255))
        frame = bytes(damaged)
    caplen = draw(st.integers(0, len(frame)))
    if draw(st.booleans()):
        caplen = len(frame)
    return linktype, frame, caplen


@settings(max_examples=600, deadline=None)
@given(case=frames())
def test_fast_route_agrees_with_the_general_decoder(case: tuple[int, bytes, int]) -> None:
    linktype, frame, caplen = case
    buf = b"\x00" * 5 + frame
    fast = DECODERS[linktype](buf, 5, caplen, 99, 1)
    general = GENERAL_DECODERS[linktype](buf, 5, caplen, 99, 1)
    assert fast == general


def test_fast_route_is_taken_for_the_common_shapes() -> None:
    tcp = g.tcp_segment(1, 2, 3, 4, g.ACK, b"payload")
    for src, dst in (("10.0.0.1", "10.0.0.2"), ("fd00::1", "fd00::2")):
        ip, ethertype = g.ip_datagram(src, dst, tcp, 1)
        for linktype in LINKS:
            frame = g.carried_frame(g.SynthPacket(0, ip, ethertype), linktype)
            result = DECODERS[linktype](frame, 0, len(frame), 0, 0)
            assert isinstance(result, TcpPacket)
            assert frame[result.payload_offset : result.payload_offset + 7] == b"payload"


def test_unknown_link_types_have_no_decoder() -> None:
    assert decoder_for(147) is None  # LINKTYPE_USER0
    assert decoder_for(g.LINKTYPE_ETHERNET) is DECODERS[g.LINKTYPE_ETHERNET]
