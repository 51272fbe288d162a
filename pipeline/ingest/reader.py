"""CaptureReader: TCP packets and anomalies out of one pcap / pcapng file or a byte range of it."""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from types import TracebackType
from typing import TYPE_CHECKING, BinaryIO, cast

from pipeline.ingest.pcap import (
    FILE_HEADER_LEN,
    PcapHeader,
    PcapRecords,
    parse_pcap_header,
    read_pcap,
)
from pipeline.ingest.pcapng import read_pcapng
from pipeline.ingest.pcapng_blocks import PcapngBlocks, PcapngContext
from pipeline.ingest.records import CaptureAnomaly, CaptureStats, TcpPacket
from pipeline.ingest.sniff import detect_format, unknown_format
from pipeline.ingest.split import CaptureSplit
from pipeline.ingest.types import Buffer

if TYPE_CHECKING:
    from pipeline.ingest.scan import PacketScanner


class CaptureReader:
    """Walks the records (pcap) or blocks (pcapng) starting in [start, end) of a capture file.

    Iterating yields TcpPacket for every TCP segment and CaptureAnomaly for bad input; `stats`
    fills as it goes.  Payloads are not copied: `payload(packet)` reads them from the mapped
    file, so the reader must stay open while they are needed.

    `context` (from a CaptureSplit) lets a range that does not start at the file beginning be
    decoded without reading what precedes it; without it a range start is first walked to from
    the beginning of the file.

    With a `scanner` (`pipeline.ingest.scan`), runs of plain TCP packets are read by compiled
    code into the scanner's columns instead of one TcpPacket each: `scan()` then also yields
    the scanner whenever it holds packets, and the caller takes them and clears it.
    """

    def __init__(
        self,
        path: str,
        start: int | None = None,
        end: int | None = None,
        *,
        context: PcapHeader | PcapngContext | None = None,
        scanner: PacketScanner | None = None,
    ) -> None:
        self.path = path
        self.scanner = scanner
        self.stats = CaptureStats()
        self.format = "unknown"
        self.comments: list[tuple[int, str]] = []  # pcapng comments: (option offset, text)
        self._start = start
        self._end = end
        self._context = context
        self._file: BinaryIO | None = None
        self._buf: bytes | mmap.mmap = b""  # the file mapped, empty when closed
        self._open_error: str | None = None
        try:
            self._file = open(path, "rb")  # noqa: SIM115 - closed by close()
            self.size = os.fstat(self._file.fileno()).st_size
            if self.size:
                self._buf = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as err:
            self.size = 0
            self._open_error = f"{type(err).__name__}: {err}"

    @classmethod
    def from_split(cls, split: CaptureSplit, scanner: PacketScanner | None = None) -> CaptureReader:
        return cls(split.path, split.start, split.end, context=split.context, scanner=scanner)

    def __enter__(self) -> CaptureReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if isinstance(self._buf, mmap.mmap):
            self._buf.close()
        self._buf = b""
        if self._file is not None:
            self._file.close()
            self._file = None

    def mapped(self) -> bytes | mmap.mmap:
        """The file's bytes as mapped (empty when closed or empty)."""
        return self._buf

    def payload(self, packet: TcpPacket) -> bytes:
        """The captured payload bytes of a packet this reader yielded."""
        return self._buf[packet.payload_offset : packet.payload_offset + packet.payload_len]

    def __iter__(self) -> Iterator[TcpPacket | CaptureAnomaly]:
        if self.scanner is not None:
            raise TypeError("a reader with a scanner is read with scan()")
        return cast("Iterator[TcpPacket | CaptureAnomaly]", self._records())

    def scan(self) -> Iterator[TcpPacket | CaptureAnomaly | PacketScanner]:
        """Like iterating, and the scanner whenever it holds packets (see the class)."""
        if self.scanner is not None:
            self.scanner.reset_counters()
        try:
            yield from self._records()
        finally:
            self._count_scanned()

    def _count_scanned(self) -> None:
        scanner = self.scanner
        if scanner is not None:
            self.stats.packets += scanner.packets
            self.stats.tcp_packets += scanner.packets
            self.stats.bytes += scanner.bytes
            self.stats.payload_bytes += scanner.payload_bytes
            scanner.reset_counters()

    def _records(self) -> Iterator[TcpPacket | CaptureAnomaly | PacketScanner]:
        if self._open_error is not None:
            yield self._note(CaptureAnomaly("unreadable_file", 0, self._open_error))
            return
        buf, size = self._buf, self.size
        self.format = detect_format(buf, size)
        start = self._start or 0
        end = size if self._end is None else min(self._end, size)
        if self.format == "pcap":
            yield from self._read_pcap(buf, size, start, end)
        elif self.format == "pcapng":
            yield from self._read_pcapng(buf, size, start, end)
        elif start == 0:
            yield self._note(unknown_format(buf, size))

    def _read_pcap(
        self, buf: Buffer, size: int, start: int, end: int
    ) -> Iterator[TcpPacket | CaptureAnomaly | PacketScanner]:
        header = self._context if isinstance(self._context, PcapHeader) else None
        if header is None:
            parsed = parse_pcap_header(buf, size)
            if isinstance(parsed, CaptureAnomaly):
                yield self._note(parsed)
                return
            header = parsed
            if start > FILE_HEADER_LEN:
                walk = PcapRecords(buf, size, header).offsets(FILE_HEADER_LEN)
                start = _first_at_or_after(walk, start, size)
        first = max(start, FILE_HEADER_LEN)
        # Splits of one file: the one holding the file header reports it, once.
        owns_header = (self._start or 0) < FILE_HEADER_LEN
        yield from read_pcap(
            buf, size, header, first, end, self.stats, reads_header=owns_header,
            scanner=self.scanner,
        )  # fmt: skip

    def _read_pcapng(
        self, buf: Buffer, size: int, start: int, end: int
    ) -> Iterator[TcpPacket | CaptureAnomaly | PacketScanner]:
        context = self._context if isinstance(self._context, PcapngContext) else None
        blocks = PcapngBlocks(buf, size, context)
        if context is None and start > 0:
            start = _first_at_or_after(blocks.offsets(0), start, size)
        blocks.comments = self.comments
        yield from read_pcapng(buf, size, blocks, start, end, self.stats, self.scanner)

    def _note(self, anomaly: CaptureAnomaly) -> CaptureAnomaly:
        self.stats.note(anomaly)
        return anomaly


def _first_at_or_after(offsets: Iterator[int], start: int, size: int) -> int:
    """Walk a record/block walker until the first boundary at or after start."""
    for off in offsets:
        if off >= start:
            return off
    return size


def iter_capture(
    path: str, start: int | None = None, end: int | None = None
) -> Iterator[TcpPacket | CaptureAnomaly]:
    """TCP packets and anomalies of one file (payloads stay in the file; see CaptureReader)."""
    with CaptureReader(path, start, end) as reader:
        yield from reader
