"""Pure synthesis of Ethernet/IP/TCP packets for one client <-> server conversation.

The proxy sees a byte stream, not packets; this rebuilds what a capture on the wire between
client and broker would look like: handshake, data segments with consistent seq/ack numbers,
FIN or RST. ``skip`` advances a direction's sequence number over bytes that were not captured,
so that a reassembler reports a gap instead of silently joining the pieces.

TCP checksums are left zero (as with checksum offload); IPv4 header checksums are computed.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import struct
from dataclasses import dataclass, field

from pipeline.net import ACK, FIN, PSH, RST, SYN, Direction, Endpoint

ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_IPV6 = 0x86DD
CLIENT_MAC = bytes.fromhex("020000000001")
SERVER_MAC = bytes.fromhex("020000000002")
WINDOW = 0xFFFF
TTL = 64

# largest payload whose IP length field still fits 16 bits (IPv4 total length includes its
# 20-byte header, IPv6 payload length does not)
MAX_PAYLOAD_V4 = 0xFFFF - 20 - 20
MAX_PAYLOAD_V6 = 0xFFFF - 20

_TCP_TAIL = struct.Struct("!IIBBHHH")  # after the ports
_IPV4_HEAD = struct.Struct("!BBHHHBBH")  # before the addresses
_IPV6_HEAD = struct.Struct("!IHBB")
_MASK32 = 0xFFFFFFFF

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def endpoint(host: str, port: int) -> Endpoint:
    """An endpoint as the packets name it: the address without an IPv6 zone (``fe80::1%lo``)."""
    return Endpoint(str(ipaddress.ip_address(host.split("%", 1)[0])), port)


def address(endpoint: Endpoint) -> IPAddress:
    return ipaddress.ip_address(endpoint.ip)


@dataclass(slots=True)
class SynthPacket:
    """A packet as parts: link/IP/TCP header bytes, then the payload untouched."""

    ts_ns: int
    header: bytes
    payload: bytes | memoryview = b""

    @property
    def parts(self) -> tuple[bytes | memoryview, ...]:
        return (self.header, self.payload) if self.payload else (self.header,)

    def to_bytes(self) -> bytes:
        return self.header + bytes(self.payload)


def common_family(client: Endpoint, server: Endpoint) -> tuple[Endpoint, Endpoint]:
    """Both endpoints in one IP family: unwrap IPv4-mapped IPv6, else map IPv4 into IPv6."""
    client, server = _unmapped(client), _unmapped(server)
    if address(client).version == address(server).version:
        return client, server
    return _as_v6(client), _as_v6(server)


def _unmapped(endpoint: Endpoint) -> Endpoint:
    ip = address(endpoint)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        return Endpoint(str(ip.ipv4_mapped), endpoint.port)
    return endpoint


def _as_v6(endpoint: Endpoint) -> Endpoint:
    if address(endpoint).version == 6:
        return endpoint
    return Endpoint(str(ipaddress.IPv6Address(f"::ffff:{endpoint.ip}")), endpoint.port)


# RFC 6528: ISN = M + F(4-tuple, secret), M a clock ticking every 4 microseconds
ISN_CLOCK_NS = 4000


@dataclass(frozen=True, slots=True)
class IsnGenerator:
    """Initial sequence numbers per connection, as a real stack chooses them (RFC 6528): a
    keyed hash of the 4-tuple plus a 4-microsecond clock. Two connections on the same 4-tuple
    (a client reusing its port) start at different sequence numbers, and nothing about one
    connection can be told from another's numbers without the key."""

    key: bytes = field(default_factory=lambda: os.urandom(16))

    def pair(self, client: Endpoint, server: Endpoint, syn_ts_ns: int) -> tuple[int, int]:
        """(client ISN, server ISN) for a connection whose SYN was seen at ``syn_ts_ns``."""
        tuple_bytes = (
            address(client).packed + client.port.to_bytes(2, "big")
            + address(server).packed + server.port.to_bytes(2, "big")
        )
        digest = hashlib.blake2b(tuple_bytes, key=self.key, digest_size=8).digest()
        clock = syn_ts_ns // ISN_CLOCK_NS
        return (
            (clock + int.from_bytes(digest[:4], "big")) & _MASK32,
            (clock + int.from_bytes(digest[4:], "big")) & _MASK32,
        )


@dataclass(slots=True)
class _DirectionState:
    """One direction's constant header parts, precomputed, and its running counters."""

    link: bytes  # Ethernet header
    addresses: bytes  # IP source + destination
    ports: bytes  # TCP source + destination port
    checksum_base: int  # IPv4: one's-complement sum of the header words that never change
    next_seq: int
    ip_id: int = 0

    @classmethod
    def between(cls, src: Endpoint, dst: Endpoint, src_mac: bytes, dst_mac: bytes,
                isn: int) -> _DirectionState:
        source, destination = address(src), address(dst)
        v6 = source.version == 6
        link = dst_mac + src_mac + (b"\x86\xdd" if v6 else b"\x08\x00")
        addresses = source.packed + destination.packed
        base = 0
        if not v6:
            fixed = _IPV4_HEAD.pack(0x45, 0, 0, 0, 0x4000, TTL, 6, 0) + addresses
            base = sum(struct.unpack("!10H", fixed))
        return cls(link, addresses, struct.pack("!HH", src.port, dst.port), base, isn)


@dataclass(slots=True)
class TcpConversation:
    client: Endpoint
    server: Endpoint
    client_isn: int = 0x10000000
    server_isn: int = 0x20000000
    # per direction: its own header parts and counters, and the opposite direction's (whose
    # next sequence number its packets acknowledge)
    _dirs: dict[Direction, tuple[_DirectionState, _DirectionState]] = field(init=False)
    _max_payload: int = field(init=False)
    _v6: bool = field(init=False)

    def __post_init__(self) -> None:
        self.client, self.server = common_family(self.client, self.server)
        self._v6 = address(self.client).version == 6
        self._max_payload = MAX_PAYLOAD_V6 if self._v6 else MAX_PAYLOAD_V4
        c2s = _DirectionState.between(
            self.client, self.server, CLIENT_MAC, SERVER_MAC, self.client_isn
        )
        s2c = _DirectionState.between(
            self.server, self.client, SERVER_MAC, CLIENT_MAC, self.server_isn
        )
        self._dirs = {Direction.C2S: (c2s, s2c), Direction.S2C: (s2c, c2s)}

    @property
    def max_payload(self) -> int:
        return self._max_payload

    def next_seq(self, direction: Direction) -> int:
        return self._dirs[direction][0].next_seq

    def _packet(
        self, direction: Direction, ts_ns: int, flags: int, payload: bytes | memoryview = b""
    ) -> SynthPacket:
        d, peer = self._dirs[direction]
        ack = peer.next_seq if flags & ACK else 0
        tcp = _TCP_TAIL.pack(d.next_seq, ack, 5 << 4, flags, WINDOW, 0, 0)
        size = 20 + len(payload)
        if self._v6:
            ip = _IPV6_HEAD.pack(6 << 28, size, 6, TTL)
        else:
            d.ip_id = ident = (d.ip_id + 1) & 0xFFFF
            total = d.checksum_base + 20 + size + ident
            total = (total & 0xFFFF) + (total >> 16)
            total = (total & 0xFFFF) + (total >> 16)
            ip = _IPV4_HEAD.pack(0x45, 0, 20 + size, ident, 0x4000, TTL, 6, ~total & 0xFFFF)
        return SynthPacket(ts_ns, d.link + ip + d.addresses + d.ports + tcp, payload)

    def _advance(self, direction: Direction, count: int) -> None:
        d = self._dirs[direction][0]
        d.next_seq = (d.next_seq + count) & _MASK32

    def syn(self, ts_ns: int) -> SynthPacket:
        packet = self._packet(Direction.C2S, ts_ns, SYN)
        self._advance(Direction.C2S, 1)
        return packet

    def syn_ack(self, ts_ns: int) -> SynthPacket:
        packet = self._packet(Direction.S2C, ts_ns, SYN | ACK)
        self._advance(Direction.S2C, 1)
        return packet

    def ack(self, direction: Direction, ts_ns: int) -> SynthPacket:
        return self._packet(direction, ts_ns, ACK)

    def handshake(self, syn_ts_ns: int, established_ts_ns: int) -> list[SynthPacket]:
        return [
            self.syn(syn_ts_ns),
            self.syn_ack(established_ts_ns),
            self.ack(Direction.C2S, established_ts_ns),
        ]

    def refused(self, ts_ns: int) -> SynthPacket:
        """The server's answer to a SYN when the connection could not be made."""
        return self._packet(Direction.S2C, ts_ns, RST | ACK)

    def data(
        self, direction: Direction, ts_ns: int, payload: bytes | memoryview
    ) -> list[SynthPacket]:
        """Data segments of at most ``max_payload`` bytes, all stamped with the read time."""
        view = memoryview(payload) if len(payload) > self._max_payload else payload
        packets = []
        for start in range(0, len(payload), self._max_payload):
            piece = view[start : start + self._max_payload]
            packets.append(self._packet(direction, ts_ns, PSH | ACK, piece))
            self._advance(direction, len(piece))
        return packets

    def skip(self, direction: Direction, count: int) -> None:
        """Account for ``count`` bytes that were forwarded but not captured."""
        self._advance(direction, count)

    def fin(self, direction: Direction, ts_ns: int) -> SynthPacket:
        packet = self._packet(direction, ts_ns, FIN | ACK)
        self._advance(direction, 1)
        return packet

    def rst(self, direction: Direction, ts_ns: int) -> SynthPacket:
        return self._packet(direction, ts_ns, RST | ACK)
