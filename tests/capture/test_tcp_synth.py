from __future__ import annotations

import ipaddress
import socket

import dpkt
from hypothesis import given, settings
from hypothesis import strategies as st

from capture.tcp_synth import (
    MAX_PAYLOAD_V4,
    MAX_PAYLOAD_V6,
    SynthPacket,
    TcpConversation,
    common_family,
    endpoint,
)
from pipeline.net import ACK, FIN, PSH, RST, SYN, Direction

CLIENT = endpoint("10.1.2.3", 50123)
SERVER = endpoint("10.9.8.7", 61613)


def _parse(packet: SynthPacket) -> dpkt.tcp.TCP:
    eth = dpkt.ethernet.Ethernet(packet.to_bytes())
    return eth.data.data


def _ip(packet: SynthPacket) -> dpkt.ip.IP | dpkt.ip6.IP6:
    return dpkt.ethernet.Ethernet(packet.to_bytes()).data


def test_handshake_then_data_then_fin_has_consistent_numbers() -> None:
    conv = TcpConversation(CLIENT, SERVER, client_isn=1000, server_isn=5000)
    packets = conv.handshake(10, 20)
    packets += conv.data(Direction.C2S, 30, b"CONNECT\n\n\0")
    packets += conv.data(Direction.S2C, 40, b"CONNECTED\n\n\0")
    packets.append(conv.fin(Direction.C2S, 50))
    packets.append(conv.fin(Direction.S2C, 60))
    tcps = [_parse(p) for p in packets]
    assert [t.flags for t in tcps] == [
        SYN, SYN | ACK, ACK, PSH | ACK, PSH | ACK, FIN | ACK, FIN | ACK
    ]
    assert [(t.seq, t.ack) for t in tcps] == [
        (1000, 0),
        (5000, 1001),
        (1001, 5001),
        (1001, 5001),
        (5001, 1011),
        (1011, 5013),
        (5013, 1012),
    ]
    assert [p.ts_ns for p in packets] == [10, 20, 20, 30, 40, 50, 60]
    assert [(t.sport, t.dport) for t in tcps[:2]] == [(50123, 61613), (61613, 50123)]


def test_ipv4_header_is_valid_and_checksummed() -> None:
    conv = TcpConversation(CLIENT, SERVER)
    [packet] = conv.data(Direction.S2C, 1, b"hello")
    ip = _ip(packet)
    assert socket.inet_ntoa(ip.src) == "10.9.8.7" and socket.inet_ntoa(ip.dst) == "10.1.2.3"
    assert ip.len == 20 + 20 + 5 and ip.p == 6
    header = packet.header[14:34]
    total = sum(int.from_bytes(header[i : i + 2], "big") for i in range(0, 20, 2))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    assert total == 0xFFFF


def test_large_chunks_are_split_into_segments_that_fit_ip() -> None:
    payload = bytes(range(256)) * 1000
    for client, server, limit in (
        (CLIENT, SERVER, MAX_PAYLOAD_V4),
        (endpoint("::1", 4000), endpoint("::1", 61613), MAX_PAYLOAD_V6),
    ):
        conv = TcpConversation(client, server, client_isn=7)
        packets = conv.data(Direction.C2S, 99, payload)
        assert len(packets) == -(-len(payload) // limit)
        assert all(len(p.payload) <= limit for p in packets)
        tcps = [_parse(p) for p in packets]
        assert b"".join(t.data for t in tcps) == payload
        assert [t.seq for t in tcps] == [7 + i * limit for i in range(len(packets))]
        assert conv.next_seq(Direction.C2S) == 7 + len(payload)


def test_skip_leaves_a_gap_the_size_of_the_lost_bytes() -> None:
    conv = TcpConversation(CLIENT, SERVER, client_isn=100)
    first = _parse(conv.data(Direction.C2S, 1, b"abc")[0])
    conv.skip(Direction.C2S, 4096)
    after = _parse(conv.data(Direction.C2S, 2, b"def")[0])
    assert after.seq - (first.seq + len(first.data)) == 4096
    server = _parse(conv.data(Direction.S2C, 3, b"x")[0])
    assert server.ack == 100 + 3 + 4096 + 3


def test_sequence_numbers_wrap_around() -> None:
    conv = TcpConversation(CLIENT, SERVER, client_isn=0xFFFFFFF0)
    conv.data(Direction.C2S, 1, b"y" * 32)
    assert conv.next_seq(Direction.C2S) == 16
    assert _parse(conv.rst(Direction.C2S, 2)).seq == 16


def test_rst_and_refused() -> None:
    conv = TcpConversation(CLIENT, SERVER, client_isn=1, server_isn=2)
    syn = _parse(conv.syn(1))
    refused = _parse(conv.refused(2))
    assert syn.flags == SYN
    assert refused.flags == RST | ACK and refused.ack == 2
    assert (refused.sport, refused.dport) == (61613, 50123)


def test_ipv6_conversation() -> None:
    conv = TcpConversation(endpoint("fe80::1%lo", 1234), endpoint("2001:db8::5", 61613))
    [packet] = conv.data(Direction.C2S, 1, b"SEND")
    eth = dpkt.ethernet.Ethernet(packet.to_bytes())
    assert eth.type == dpkt.ethernet.ETH_TYPE_IP6
    ip6 = eth.data
    assert ipaddress.ip_address(ip6.src) == ipaddress.ip_address("fe80::1")
    assert ipaddress.ip_address(ip6.dst) == ipaddress.ip_address("2001:db8::5")
    assert ip6.plen == 20 + 4 and ip6.data.data == b"SEND"


def test_mixed_families_end_up_in_one() -> None:
    v4, v6 = endpoint("127.0.0.1", 1), endpoint("::1", 2)
    mapped = endpoint("::ffff:127.0.0.1", 3)
    client, server = common_family(v6, v4)
    mapped_server = ipaddress.ip_address(server.ip)
    assert isinstance(mapped_server, ipaddress.IPv6Address)
    assert (client.ip, str(mapped_server.ipv4_mapped)) == ("::1", v4.ip)
    client, server = common_family(mapped, v4)
    assert (str(client.ip), client.port, str(server.ip)) == ("127.0.0.1", 3, "127.0.0.1")
    conv = TcpConversation(v6, v4)
    eth = dpkt.ethernet.Ethernet(conv.syn(1).to_bytes())
    assert eth.type == dpkt.ethernet.ETH_TYPE_IP6


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([Direction.C2S, Direction.S2C]), st.integers(0, 70000)),
        max_size=12,
    ),
    st.integers(0, 0xFFFFFFFF),
    st.integers(0, 0xFFFFFFFF),
)
def test_any_interleaving_reassembles_and_acks_what_the_peer_sent(
    chunks: list[tuple[Direction, int]], client_isn: int, server_isn: int
) -> None:
    conv = TcpConversation(CLIENT, SERVER, client_isn, server_isn)
    conv.handshake(0, 0)
    sent = {Direction.C2S: b"", Direction.S2C: b""}
    streams: dict[Direction, dict[int, bytes]] = {Direction.C2S: {}, Direction.S2C: {}}
    for i, (direction, size) in enumerate(chunks):
        data = bytes([i % 251]) * size
        for packet in conv.data(direction, i, data):
            tcp = _parse(packet)
            streams[direction][tcp.seq] = tcp.data
            peer_sent = len(sent[direction.reverse])
            isn = server_isn if direction is Direction.C2S else client_isn
            assert tcp.ack == (isn + 1 + peer_sent) & 0xFFFFFFFF
        sent[direction] += data
    for direction, isn in ((Direction.C2S, client_isn), (Direction.S2C, server_isn)):
        seq, joined = (isn + 1) & 0xFFFFFFFF, b""
        while seq in streams[direction]:
            piece = streams[direction].pop(seq)
            joined += piece
            seq = (seq + len(piece)) & 0xFFFFFFFF
        assert joined == sent[direction] and not streams[direction]
