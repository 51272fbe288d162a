"""Cut one capture file into byte ranges that separate tasks can read independently."""

from __future__ import annotations

import mmap
import os
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.ingest.pcap import FILE_HEADER_LEN, PcapHeader, PcapRecords, parse_pcap_header
from pipeline.ingest.pcapng_blocks import PcapngBlocks, PcapngContext
from pipeline.ingest.scan import compiled_walks
from pipeline.ingest.sniff import detect_format


@dataclass(slots=True, frozen=True)
class CaptureSplit:
    """Records or blocks starting in [start, end) of `path`, with what decoding them needs.

    `context` is None for a split that starts at the beginning of the file; otherwise the pcap
    file header or the pcapng section context in force at `start`.  Picklable.
    """

    path: str
    index: int
    start: int
    end: int
    format: str  # "pcap" | "pcapng" | "unknown"
    context: PcapHeader | PcapngContext | None


def split_capture(path: str, target_bytes: int) -> list[CaptureSplit]:
    """Cut `path` at record / block boundaries into ranges of about target_bytes each.

    Walks record or block headers only (the same walk a reader does, so every boundary is a
    position a reader of the previous range stops at exactly).  An unreadable, unknown or small
    file comes back as one split covering the whole file.
    """
    try:
        size = os.path.getsize(path)
    except OSError:
        return [CaptureSplit(path, 0, 0, 0, "unknown", None)]
    if size == 0:
        return [CaptureSplit(path, 0, 0, 0, "unknown", None)]
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        fmt = detect_format(buf, size)
        if fmt == "unknown" or size <= target_bytes:
            return [CaptureSplit(path, 0, 0, size, fmt, None)]
        if fmt == "pcap":
            return _split_pcap(path, buf, size, target_bytes)
        return _split_pcapng(path, buf, size, target_bytes)


def _split_pcap(path: str, buf: mmap.mmap, size: int, target: int) -> list[CaptureSplit]:
    header = parse_pcap_header(buf, size)
    if not isinstance(header, PcapHeader):
        return [CaptureSplit(path, 0, 0, size, "pcap", None)]
    records = PcapRecords(buf, size, header)
    starts = [0]
    next_cut = target
    walk = compiled_walks()

    def skip(off: int, last_sec: int | None) -> tuple[int, int | None]:
        assert walk is not None
        little, hlen, frac_limit = header.byte_order == "<", records.hlen, records.frac_limit
        ref = -1 if last_sec is None else last_sec
        off, sec = walk.walk_pcap(buf, off, next_cut, little, hlen, records.limit, frac_limit, ref)
        return off, None if sec < 0 else sec

    for off in records.offsets(FILE_HEADER_LEN, None if walk is None else skip):
        if off >= next_cut:
            starts.append(off)
            next_cut = off + target
    return _ranges(path, size, "pcap", starts, [None] + [header] * (len(starts) - 1))


def _split_pcapng(path: str, buf: mmap.mmap, size: int, target: int) -> list[CaptureSplit]:
    blocks = PcapngBlocks(buf, size)
    starts = [0]
    contexts: list[PcapngContext | None] = [None]
    next_cut = target
    walks = compiled_walks()
    walk = None if walks is None else walks.PcapngWalk()
    clocks_of: tuple[int, int] = (0, -1)  # (id, length) of the interface list walk knows

    def skip(off: int) -> int:
        nonlocal clocks_of
        assert walk is not None
        interfaces = blocks.interfaces
        if clocks_of != (id(interfaces), len(interfaces)):  # a new section or interface
            walk.set_clocks([(i.ts_mul, i.ts_div, i.ts_offset_ns) for i in interfaces])
            clocks_of = (id(interfaces), len(interfaces))
        little = blocks.order == "<"
        off, blocks.last_ts_ns = walk.walk(buf, off, next_cut, little, blocks.last_ts_ns)
        return off

    for off in blocks.offsets(0, None if walk is None else skip):
        if off >= next_cut:
            starts.append(off)
            contexts.append(blocks.context())
            next_cut = off + target
    return _ranges(path, size, "pcapng", starts, contexts)


def _ranges(
    path: str,
    size: int,
    fmt: str,
    starts: list[int],
    contexts: Sequence[PcapHeader | PcapngContext | None],
) -> list[CaptureSplit]:
    ends = starts[1:] + [size]
    return [
        CaptureSplit(path, i, start, end, fmt, ctx)
        for i, (start, end, ctx) in enumerate(zip(starts, ends, contexts, strict=True))
    ]
