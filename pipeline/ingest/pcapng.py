"""pcapng packet reading: enhanced, simple and obsolete packet blocks of a byte range."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from struct import Struct
from typing import TYPE_CHECKING

from pipeline.ingest.decode import PacketDecoder, settle
from pipeline.ingest.fastpath import decoder_for
from pipeline.ingest.pcapng_blocks import (
    CUSTOM_BLOCK_TYPES,
    EPB,
    IDB,
    MAX_BLOCK_LEN,
    MAX_TS_NS,
    OPB,
    SHB,
    SPB,
    Interface,
    PcapngBlocks,
)
from pipeline.ingest.records import CaptureAnomaly, CaptureStats, TcpPacket
from pipeline.ingest.types import Buffer

if TYPE_CHECKING:
    from pipeline.ingest.scan import PacketScanner

__all__ = ["MAX_TS_NS", "read_pcapng"]


def read_pcapng(
    buf: Buffer,
    size: int,
    blocks: PcapngBlocks,
    start: int,
    end: int,
    stats: CaptureStats,
    scanner: PacketScanner | None = None,
) -> Iterator[TcpPacket | CaptureAnomaly | PacketScanner]:
    """Yield the TCP packets and anomalies of the blocks that start in [start, end).

    ``scanner``: as for `pcap.read_pcap`, runs of plain enhanced packet blocks are read by it."""
    order = blocks.order
    epb = Struct(order + "7I").unpack_from  # type, length, interface, ts hi, ts lo, incl, orig
    u32 = Struct(order + "I").unpack_from
    interfaces = blocks.interfaces
    decoders = [decoder_for(i.linktype) for i in interfaces]
    clocks = [(i.ts_mul, i.ts_div, i.ts_offset_ns) for i in interfaces]
    last_ts = blocks.last_ts_ns  # a split starts with the time of the packet before it
    if scanner is not None:
        scanner.forget_interfaces()
        _add_interfaces(scanner, interfaces)
    off = start
    while off < end:
        if scanner is not None:
            scanned = scanner.scan_pcapng(buf, off, end, order == "<")
            if scanned != off:
                off, last_ts = scanned, scanner.last_ts_ns
            if scanner.count:
                yield scanner
            if off >= end:
                return
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
                ts_ns = ((ts_hi << 32) | ts_lo) * mul // div + shift
                if not 0 <= ts_ns <= MAX_TS_NS:
                    yield _bad_timestamp(off, ts_ns, stats)
                    off += blen
                    continue
                last_ts = ts_ns
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
            if blocks.interfaces is not interfaces:  # a new section
                interfaces = blocks.interfaces
                decoders, clocks = [], []
                if scanner is not None:
                    scanner.forget_interfaces()
            added = interfaces[len(decoders) :]  # one IDB adds one: no rebuild per IDB
            for iface in added:
                decoders.append(decoder_for(iface.linktype))
                clocks.append((iface.ts_mul, iface.ts_div, iface.ts_offset_ns))
            if scanner is not None:
                _add_interfaces(scanner, added)
        elif btype in (EPB, OPB):
            fields = blocks.packet_fields(off, btype, blen)
            if isinstance(fields, CaptureAnomaly):
                stats.packets += 1
                stats.skip(fields.kind)
                stats.note(fields)
                yield fields
            else:
                iface_id, units, incl, orig = fields
                iface = interfaces[iface_id]
                ts_ns = units * iface.ts_mul // iface.ts_div + iface.ts_offset_ns
                if not 0 <= ts_ns <= MAX_TS_NS:
                    yield _bad_timestamp(off, ts_ns, stats)
                else:
                    last_ts = ts_ns
                    yield from _slow_packet(
                        buf, off + 28, incl, orig, last_ts, off, decoders[iface_id], stats
                    )
        elif btype in CUSTOM_BLOCK_TYPES:
            loss = blocks.capture_loss(off, blen)
            if loss is not None:
                stats.note(loss)
                yield loss
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


def _add_interfaces(scanner: PacketScanner, interfaces: Sequence[Interface]) -> None:
    for i in interfaces:
        scanner.add_interface(i.linktype, i.ts_mul, i.ts_div, i.ts_offset_ns)


def _bad_timestamp(off: int, ts_ns: int, stats: CaptureStats) -> CaptureAnomaly:
    """A packet dated before 1970 or past 2262 (int64 ns) has a corrupt timestamp or
    if_tsoffset: it is reported and skipped, as no table could hold its time."""
    anomaly = CaptureAnomaly("bad_timestamp", off, f"timestamp {ts_ns} ns is out of range")
    stats.packets += 1
    stats.skip(anomaly.kind)
    stats.note(anomaly)
    return anomaly


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
