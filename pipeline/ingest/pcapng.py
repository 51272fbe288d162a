"""pcapng packet reading: enhanced, simple and obsolete packet blocks of a byte range."""

from __future__ import annotations

from collections.abc import Iterator
from struct import Struct

from pipeline.ingest.decode import PacketDecoder, settle
from pipeline.ingest.fastpath import decoder_for
from pipeline.ingest.pcapng_blocks import (
    EPB,
    IDB,
    MAX_BLOCK_LEN,
    OPB,
    SHB,
    SPB,
    Interface,
    PcapngBlocks,
)
from pipeline.ingest.records import CaptureAnomaly, CaptureStats, TcpPacket
from pipeline.ingest.types import Buffer


def read_pcapng(
    buf: Buffer,
    size: int,
    blocks: PcapngBlocks,
    start: int,
    end: int,
    stats: CaptureStats,
) -> Iterator[TcpPacket | CaptureAnomaly]:
    """Yield the TCP packets and anomalies of the blocks that start in [start, end)."""
    order = blocks.order
    epb = Struct(order + "7I").unpack_from  # type, length, interface, ts hi, ts lo, incl, orig
    u32 = Struct(order + "I").unpack_from
    interfaces = blocks.interfaces
    decoders = [decoder_for(i.linktype) for i in interfaces]
    clocks = [(i.ts_mul, i.ts_div, i.ts_offset_ns) for i in interfaces]
    last_ts = 0
    off = start
    while off < end:
        # Fast path: a well-formed enhanced packet block of a known interface.  Whatever it
        # rejects goes through blocks.next_block(), the walk the splitter uses.
        if size - off >= 32:
            btype, blen, iface_id, ts_hi, ts_lo, incl, orig = epb(buf, off)
            if (
                btype == EPB
                and 32 <= blen <= MAX_BLOCK_LEN
                and blen & 3 == 0
                and off + blen <= size
                and 32 + incl <= blen
                and iface_id < len(clocks)
                and u32(buf, off + blen - 4)[0] == blen
            ):
                mul, div, shift = clocks[iface_id]
                last_ts = ((ts_hi << 32) | ts_lo) * mul // div + shift
                data = off + 28
                if blen > 32 + ((incl + 3) & ~3):  # options follow the packet data
                    blocks.read_comments(data + ((incl + 3) & ~3), off + blen - 4)
                stats.packets += 1
                stats.bytes += incl
                decode = decoders[iface_id]
                result = None if decode is None else decode(buf, data, incl, last_ts, off)
                if (
                    type(result) is TcpPacket
                    and incl == orig
                    and result.payload_len == result.wire_len
                ):
                    stats.tcp_packets += 1
                    stats.payload_bytes += result.payload_len
                    yield result
                else:
                    yield from settle(result, incl, orig, off, stats)
                off += blen
                continue
        nxt, anomaly, btype, blen = blocks.next_block(off)
        if anomaly is not None:
            stats.note(anomaly)
            yield anomaly
        if btype in (SHB, IDB):
            if order != blocks.order:
                order = blocks.order
                epb = Struct(order + "7I").unpack_from
                u32 = Struct(order + "I").unpack_from
            interfaces = blocks.interfaces
            decoders = [decoder_for(i.linktype) for i in interfaces]
            clocks = [(i.ts_mul, i.ts_div, i.ts_offset_ns) for i in interfaces]
        elif btype in (EPB, OPB):
            fields = _packet_block(buf, off, blen, btype, order, interfaces)
            if isinstance(fields, CaptureAnomaly):
                stats.packets += 1
                stats.skip(fields.kind)
                stats.note(fields)
                yield fields
            else:
                iface_id, units, incl, orig = fields
                iface = interfaces[iface_id]
                last_ts = units * iface.ts_mul // iface.ts_div + iface.ts_offset_ns
                yield from _slow_packet(
                    buf, off + 28, incl, orig, last_ts, off, decoders[iface_id], stats
                )
        elif btype == SPB:
            if not interfaces:
                bad = CaptureAnomaly("unknown_interface", off, "simple packet block before any IDB")
                stats.packets += 1
                stats.skip(bad.kind)
                stats.note(bad)
                yield bad
            else:
                orig = u32(buf, off + 8)[0]
                incl = min(orig, blen - 16)
                if interfaces[0].snaplen:
                    incl = min(incl, interfaces[0].snaplen)
                # An SPB has no timestamp: it inherits the previous packet's.
                yield from _slow_packet(buf, off + 12, incl, orig, last_ts, off, decoders[0], stats)
        if nxt is None:
            return
        off = nxt


def _packet_block(
    buf: Buffer, off: int, blen: int, btype: int, order: str, interfaces: list[Interface]
) -> tuple[int, int, int, int] | CaptureAnomaly:
    """(interface, timestamp units, captured length, original length) of an EPB / OPB."""
    if blen < 32:
        return CaptureAnomaly("bad_block_length", off, f"packet block of {blen} bytes")
    if btype == EPB:
        iface_id, ts_hi, ts_lo, incl, orig = Struct(order + "IIIII").unpack_from(buf, off + 8)
    else:
        iface_id, _drops, ts_hi, ts_lo, incl, orig = Struct(order + "HHIIII").unpack_from(
            buf, off + 8
        )
    if iface_id >= len(interfaces):
        return CaptureAnomaly("unknown_interface", off, f"interface {iface_id} not described")
    if 32 + incl > blen:
        return CaptureAnomaly("bad_block_length", off, f"captured length {incl} exceeds block")
    return iface_id, (ts_hi << 32) | ts_lo, incl, orig


def _slow_packet(
    buf: Buffer,
    data: int,
    incl: int,
    orig: int,
    ts_ns: int,
    record: int,
    decode: PacketDecoder | None,
    stats: CaptureStats,
) -> list[TcpPacket | CaptureAnomaly]:
    stats.packets += 1
    stats.bytes += incl
    result = None if decode is None else decode(buf, data, incl, ts_ns, record)
    return settle(result, incl, orig, record, stats)
