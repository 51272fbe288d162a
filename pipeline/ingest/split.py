"""Cut one capture file into byte ranges that separate tasks can read independently."""

from __future__ import annotations

import mmap
import os
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.ingest.pcap import FILE_HEADER_LEN, PcapHeader, PcapRecords, parse_pcap_header
from pipeline.ingest.pcapng_blocks import PcapngBlocks, PcapngContext
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
    starts = [0]
    next_cut = target
    for off in PcapRecords(buf, size, header).offsets(FILE_HEADER_LEN):
        if off >= next_cut:
            starts.append(off)
            next_cut = off + target
    return _ranges(path, size, "pcap", starts, [None] + [header] * (len(starts) - 1))


def _split_pcapng(path: str, buf: mmap.mmap, size: int, target: int) -> list[CaptureSplit]:
    blocks = PcapngBlocks(buf, size)
    starts = [0]
    contexts: list[PcapngContext | None] = [None]
    next_cut = target
    for off in blocks.offsets(0):
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
