"""Per-link-type packet decoders with a one-unpack route for the common packet shapes.

For IPv4 without options and IPv6 without extension headers, fully captured, one
struct.unpack_from reads the link field, the IP header and the TCP header at once; anything
else (VLAN tags, options, fragments, cuts, other protocols) goes to the general decoders in
decode.py, which give the same answer for the common shapes.
"""

from __future__ import annotations

from struct import Struct

from pipeline.ingest import decode as general
from pipeline.ingest.decode import Decoded, PacketDecoder, v4_name, v4_names, v6_name, v6_names
from pipeline.ingest.records import TcpPacket
from pipeline.ingest.types import Buffer

_IPV4_TCP = "BxH2xHxB2x4s4sHHIIBBH"  # version/ihl, total, frag, proto, src, dst + TCP header
_IPV6_TCP = "IHBx16s16sHHIIBBH"  # version/class/flow, payload length, next header, src, dst


def _combined(
    link_format: str, link_len: int, v4_link: object, v6_link: object, slow: PacketDecoder
) -> PacketDecoder:
    """A decoder trying the one-unpack route before `slow`.

    `link_format` reads one value from the link header that must equal v4_link (IPv4) or
    v6_link (IPv6); "0s" with b"" for links without a header (the IP version decides).
    """
    unpack4 = Struct("!" + link_format + _IPV4_TCP).unpack_from
    unpack6 = Struct("!" + link_format + _IPV6_TCP).unpack_from
    min4, min6 = link_len + 40, link_len + 60
    names4, names6 = v4_names, v6_names

    def decode(buf: Buffer, off: int, caplen: int, ts_ns: int, record: int) -> Decoded:
        if caplen >= min4:
            link, vihl, total, frag, proto, src, dst, sport, dport, seq, ack, offx2, flags, win = (
                unpack4(buf, off)
            )
            if link == v4_link and vihl == 0x45:
                hlen = (offx2 >> 4) << 2
                if (
                    proto == 6
                    and not frag & 0x3FFF
                    and link_len + total <= caplen
                    and 20 <= hlen <= total - 20
                ):
                    data = off + link_len + 20 + hlen
                    size = total - 20 - hlen
                    src_name = names4.get(src) or v4_name(src)
                    dst_name = names4.get(dst) or v4_name(dst)
                    return TcpPacket(
                        ts_ns,
                        src_name,
                        sport,
                        dst_name,
                        dport,
                        seq,
                        ack,
                        flags,
                        win,
                        data,
                        size,
                        size,
                        record,
                    )
            elif link == v6_link and caplen >= min6:
                link, vtf, plen, nxt, src, dst, sport, dport, seq, ack, offx2, flags, win = unpack6(
                    buf, off
                )
                hlen = (offx2 >> 4) << 2
                if (
                    vtf >> 28 == 6
                    and nxt == 6
                    and link_len + 40 + plen <= caplen
                    and 20 <= hlen <= plen
                ):
                    data = off + link_len + 40 + hlen
                    size = plen - hlen
                    src_name = names6.get(src) or v6_name(src)
                    dst_name = names6.get(dst) or v6_name(dst)
                    return TcpPacket(
                        ts_ns,
                        src_name,
                        sport,
                        dst_name,
                        dport,
                        seq,
                        ack,
                        flags,
                        win,
                        data,
                        size,
                        size,
                        record,
                    )
        return slow(buf, off, caplen, ts_ns, record)

    return decode


_ETHERNET = _combined("12xH", 14, 0x0800, 0x86DD, general.decode_ethernet)
_SLL = _combined("14xH", 16, 0x0800, 0x86DD, general.decode_sll)
_SLL2 = _combined("H18x", 20, 0x0800, 0x86DD, general.decode_sll2)
_RAW = _combined("0s", 0, b"", b"", general.decode_raw)
_NULL = _combined("4s", 4, b"\x02\0\0\0", b"\x1e\0\0\0", general.decode_null)
_LOOP = _combined("4s", 4, b"\0\0\0\x02", b"\0\0\0\x1e", general.decode_null)
_IPV4 = _combined("0s", 0, b"", None, general.decode_ipv4)
_IPV6 = _combined("0s", 0, None, b"", general.decode_ipv6)

DECODERS: dict[int, PacketDecoder] = {
    general.LINKTYPE_NULL: _NULL,
    general.LINKTYPE_LOOP: _LOOP,
    general.LINKTYPE_ETHERNET: _ETHERNET,
    general.LINKTYPE_RAW: _RAW,
    general.LINKTYPE_RAW_OPENBSD: _RAW,
    general.LINKTYPE_RAW_BSDOS: _RAW,
    general.LINKTYPE_IPV4: _IPV4,
    general.LINKTYPE_IPV6: _IPV6,
    general.LINKTYPE_LINUX_SLL: _SLL,
    general.LINKTYPE_LINUX_SLL2: _SLL2,
}
GENERAL_DECODERS: dict[int, PacketDecoder] = {
    general.LINKTYPE_NULL: general.decode_null,
    general.LINKTYPE_LOOP: general.decode_null,
    general.LINKTYPE_ETHERNET: general.decode_ethernet,
    general.LINKTYPE_RAW: general.decode_raw,
    general.LINKTYPE_RAW_OPENBSD: general.decode_raw,
    general.LINKTYPE_RAW_BSDOS: general.decode_raw,
    general.LINKTYPE_IPV4: general.decode_ipv4,
    general.LINKTYPE_IPV6: general.decode_ipv6,
    general.LINKTYPE_LINUX_SLL: general.decode_sll,
    general.LINKTYPE_LINUX_SLL2: general.decode_sll2,
}


def decoder_for(linktype: int) -> PacketDecoder | None:
    """The packet decoder for a link type, or None when the link type is not supported."""
    return DECODERS.get(linktype)
