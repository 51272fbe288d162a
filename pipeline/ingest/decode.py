"""Link, IP and TCP header decoding by offsets: the general path, for every packet shape.

A decoder takes the capture buffer, the offset and captured length of one packet, its capture
time and record offset, and returns a TcpPacket, a reason string for a packet that is not TCP
(counted, then skipped), or a CaptureAnomaly for a malformed one.  No payload is copied.
The common shapes take a faster route first (fastpath.py).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from struct import Struct

from pipeline.ingest.records import CaptureAnomaly, CaptureStats, TcpPacket
from pipeline.ingest.types import Buffer

Decoded = TcpPacket | str | CaptureAnomaly  # packet, reason it is not TCP, or malformed
PacketDecoder = Callable[[Buffer, int, int, int, int], Decoded]

LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW_OPENBSD = 12
LINKTYPE_RAW_BSDOS = 14
LINKTYPE_RAW = 101
LINKTYPE_LOOP = 108
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276

ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_IPV6 = 0x86DD
VLAN_TPIDS = frozenset({0x8100, 0x88A8, 0x9100, 0x9200})
# Address families a BSD loopback header may carry (Linux, BSDs, macOS numbering).
NULL_AF_IPV4 = frozenset({2})
NULL_AF_IPV6 = frozenset({10, 24, 28, 30})

IPPROTO_TCP = 6
IPV6_SKIPPABLE_EXT = frozenset({0, 43, 60})  # hop-by-hop, routing, destination options
IPV6_FRAGMENT = 44
IPV6_AH = 51

CUT = "headers_cut"  # reason: the capture ends inside the link/IP/TCP headers

_U16 = Struct("!H")
_U32_LE = Struct("<I")
_U32_BE = Struct("!I")
_IPV4 = Struct("!BBHHHBBH4s4s")
_IPV6 = Struct("!IHBB16s16s")
_TCP = Struct("!HHIIBBH")
_EXT = Struct("!BB")

v4_names: dict[bytes, str] = {}
v6_names: dict[bytes, str] = {}
_NAME_CACHE_LIMIT = 1 << 16


def v4_name(raw: bytes) -> str:
    name = v4_names.get(raw)
    if name is None:
        if len(v4_names) >= _NAME_CACHE_LIMIT:
            v4_names.clear()
        name = v4_names[raw] = str(ipaddress.IPv4Address(raw))
    return name


def v6_name(raw: bytes) -> str:
    name = v6_names.get(raw)
    if name is None:
        if len(v6_names) >= _NAME_CACHE_LIMIT:
            v6_names.clear()
        name = v6_names[raw] = ipaddress.IPv6Address(raw).compressed
    return name


def _tcp(
    buf: Buffer, off: int, end: int, seg_len: int, src: str, dst: str, ts_ns: int, record: int
) -> Decoded:
    """Decode the TCP header at off; seg_len is the TCP segment length per the IP header."""
    if end - off < 20:
        return CUT
    sport, dport, seq, ack, offx2, flags, window = _TCP.unpack_from(buf, off)
    hlen = (offx2 >> 4) * 4
    if hlen < 20 or hlen > seg_len:
        return CaptureAnomaly("bad_tcp_header", off, f"data offset {hlen}, segment {seg_len}")
    data = off + hlen
    if data > end:
        return CUT
    wire = seg_len - hlen
    present = end - data
    if present > wire:
        present = wire  # link padding or trailer after the IP datagram
    return TcpPacket(
        ts_ns, src, sport, dst, dport, seq, ack, flags, window, data, present, wire, record
    )


def _ipv4(buf: Buffer, off: int, end: int, ts_ns: int, record: int) -> Decoded:
    if end - off < 20:
        return CUT
    vihl, _tos, total, _ident, frag, _ttl, proto, _csum, src, dst = _IPV4.unpack_from(buf, off)
    ihl = (vihl & 0x0F) * 4
    if vihl >> 4 != 4 or ihl < 20:
        return CaptureAnomaly("bad_ip_header", off, f"IPv4 version/ihl byte 0x{vihl:02x}")
    if total == 0:  # TSO: the stack left the length to the NIC
        total = end - off
    elif total < ihl:
        return CaptureAnomaly("bad_ip_header", off, f"IPv4 total length {total} < ihl {ihl}")
    if frag & 0x3FFF:
        return "ip_fragment"
    if proto != IPPROTO_TCP:
        return "not_tcp"
    stop = off + total
    return _tcp(
        buf, off + ihl, min(stop, end), total - ihl, v4_name(src), v4_name(dst), ts_ns, record
    )


def _ipv6(buf: Buffer, off: int, end: int, ts_ns: int, record: int) -> Decoded:
    if end - off < 40:
        return CUT
    vtf, plen, nxt, _hops, src, dst = _IPV6.unpack_from(buf, off)
    if vtf >> 28 != 6:
        return CaptureAnomaly("bad_ip_header", off, f"IPv6 version {vtf >> 28}")
    if plen == 0:  # jumbogram or TSO: take what was captured
        plen = end - off - 40
    pos = off + 40
    stop = pos + plen
    while nxt != IPPROTO_TCP:
        if nxt in IPV6_SKIPPABLE_EXT or nxt == IPV6_AH:
            if end - pos < 8:
                return CUT
            nxt_next, hlen = _EXT.unpack_from(buf, pos)
            step = (hlen + 2) * 4 if nxt == IPV6_AH else (hlen + 1) * 8
            pos += step
            if pos > stop:
                return CaptureAnomaly("bad_ip_header", pos - step, "IPv6 extension overruns")
            nxt = nxt_next
        elif nxt == IPV6_FRAGMENT:
            return "ip_fragment"
        else:
            return "not_tcp"
    return _tcp(buf, pos, min(stop, end), stop - pos, v6_name(src), v6_name(dst), ts_ns, record)


def _by_ethertype(buf: Buffer, etype: int, off: int, end: int, ts_ns: int, record: int) -> Decoded:
    if etype == ETHERTYPE_IPV4:
        return _ipv4(buf, off, end, ts_ns, record)
    if etype == ETHERTYPE_IPV6:
        return _ipv6(buf, off, end, ts_ns, record)
    return "non_ip"


def _by_version(buf: Buffer, off: int, end: int, ts_ns: int, record: int) -> Decoded:
    if end <= off:
        return CUT
    version = buf[off] >> 4
    if version == 4:
        return _ipv4(buf, off, end, ts_ns, record)
    if version == 6:
        return _ipv6(buf, off, end, ts_ns, record)
    return CaptureAnomaly("bad_ip_header", off, f"IP version {version} on a raw IP link")


def decode_ethernet(buf: Buffer, off: int, caplen: int, ts_ns: int, record: int) -> Decoded:
    end = off + caplen
    if caplen < 14:
        return CUT
    etype = _U16.unpack_from(buf, off + 12)[0]
    off += 14
    while etype in VLAN_TPIDS:  # 802.1Q / 802.1ad (QinQ) tags
        if end - off < 4:
            return CUT
        etype = _U16.unpack_from(buf, off + 2)[0]
        off += 4
    return _by_ethertype(buf, etype, off, end, ts_ns, record)


def decode_null(buf: Buffer, off: int, caplen: int, ts_ns: int, record: int) -> Decoded:
    # The family is in the capturing host's byte order for NULL, network order for LOOP.
    if caplen < 4:
        return CUT
    family = _U32_LE.unpack_from(buf, off)[0]
    if family > 0xFFFF:
        family = _U32_BE.unpack_from(buf, off)[0]
    end = off + caplen
    if family in NULL_AF_IPV4:
        return _ipv4(buf, off + 4, end, ts_ns, record)
    if family in NULL_AF_IPV6:
        return _ipv6(buf, off + 4, end, ts_ns, record)
    return "non_ip"


def decode_raw(buf: Buffer, off: int, caplen: int, ts_ns: int, record: int) -> Decoded:
    return _by_version(buf, off, off + caplen, ts_ns, record)


def decode_ipv4(buf: Buffer, off: int, caplen: int, ts_ns: int, record: int) -> Decoded:
    return _ipv4(buf, off, off + caplen, ts_ns, record)


def decode_ipv6(buf: Buffer, off: int, caplen: int, ts_ns: int, record: int) -> Decoded:
    return _ipv6(buf, off, off + caplen, ts_ns, record)


def decode_sll(buf: Buffer, off: int, caplen: int, ts_ns: int, record: int) -> Decoded:
    if caplen < 16:
        return CUT
    etype = _U16.unpack_from(buf, off + 14)[0]
    return _by_ethertype(buf, etype, off + 16, off + caplen, ts_ns, record)


def decode_sll2(buf: Buffer, off: int, caplen: int, ts_ns: int, record: int) -> Decoded:
    if caplen < 20:
        return CUT
    etype = _U16.unpack_from(buf, off)[0]
    return _by_ethertype(buf, etype, off + 20, off + caplen, ts_ns, record)


def settle(
    result: TcpPacket | str | CaptureAnomaly | None,
    incl: int,
    orig: int,
    record: int,
    stats: CaptureStats,
) -> list[TcpPacket | CaptureAnomaly]:
    """Count a decoded packet and list what to yield (the slow path of the readers).

    `result` None means the link type is unknown.  A TCP packet whose payload was cut is
    yielded and followed by a "snaplen_cut" (record cut by the snapshot length) or
    "short_packet" (IP length beyond the frame) anomaly.
    """
    cut = incl < orig
    if cut:
        stats.snaplen_cut += 1
    if result is None:
        stats.skip("unknown_linktype")
        return []
    if type(result) is TcpPacket:
        stats.tcp_packets += 1
        stats.payload_bytes += result.payload_len
        if result.payload_len >= result.wire_len:
            return [result]
        detail = f"{result.payload_len} of {result.wire_len} payload bytes captured"
        anomaly = CaptureAnomaly("snaplen_cut" if cut else "short_packet", record, detail)
        stats.note(anomaly)
        return [result, anomaly]
    if isinstance(result, str):
        stats.skip(result)
        if result == CUT and cut:
            anomaly = CaptureAnomaly("snaplen_cut", record, "cut inside the packet headers")
            stats.note(anomaly)
            return [anomaly]
        return []
    stats.note(result)
    stats.skip(result.kind)
    return [result]
