"""Classic pcap: file header, record walking, recovery after a corrupt record header."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from struct import Struct
from typing import TYPE_CHECKING

from pipeline.ingest.decode import settle
from pipeline.ingest.fastpath import decoder_for
from pipeline.ingest.records import CaptureAnomaly, CaptureStats, TcpPacket
from pipeline.ingest.types import Buffer

if TYPE_CHECKING:
    from pipeline.ingest.scan import PacketScanner

FILE_HEADER_LEN = 24
MAX_RECORD_LEN = 0x40000  # libpcap's largest snapshot length
RESYNC_CHAIN = 4  # consecutive plausible records required to trust a resync point
RESYNC_BLIND_SCAN = 1 << 20  # bytes scanned for a resync point when no timestamp is known
TS_WINDOW_S = 86_400  # a resync candidate's timestamp must be within a day of the last one

# magic (as read little-endian) -> (byte order, nanosecond timestamps, record header length)
_MAGICS = {
    0xA1B2C3D4: ("<", False, 16),
    0xD4C3B2A1: (">", False, 16),
    0xA1B23C4D: ("<", True, 16),
    0x4D3CB2A1: (">", True, 16),
    0xA1B2CD34: ("<", False, 24),  # Kuznetsov's "modified" pcap: 8 extra bytes a record
    0x34CDB2A1: (">", False, 24),
}
_MAGIC = Struct("<I")


@dataclass(slots=True, frozen=True)
class PcapHeader:
    byte_order: str  # "<" or ">"
    nanos: bool
    linktype: int
    snaplen: int
    record_header_len: int

    @property
    def record_limit(self) -> int:
        """Largest captured length a well-formed record may claim."""
        return self.snaplen if 0 < self.snaplen <= MAX_RECORD_LEN else MAX_RECORD_LEN


def is_pcap_magic(buf: Buffer, size: int) -> bool:
    return size >= 4 and _MAGIC.unpack_from(buf, 0)[0] in _MAGICS


def parse_pcap_header(buf: Buffer, size: int) -> PcapHeader | CaptureAnomaly:
    if size < FILE_HEADER_LEN:
        return CaptureAnomaly("truncated_file", 0, f"pcap file header needs 24 bytes, got {size}")
    byte_order, nanos, record_header_len = _MAGICS[_MAGIC.unpack_from(buf, 0)[0]]
    _maj, _min, _zone, _sigfigs, snaplen, link_field = Struct(byte_order + "HHiIII").unpack_from(
        buf, 4
    )
    # The upper bits of the link type field may carry FCS information.
    return PcapHeader(byte_order, nanos, link_field & 0xFFFF, snaplen, record_header_len)


RecordSkip = Callable[[int, int | None], tuple[int, int | None]]


class PcapRecords:
    """Record-header logic shared by the reader and the splitter, so both visit the same offsets.

    A record header is regular when incl_len <= the snapshot limit and <= orig_len, the
    sub-second field is in range and the record fits in the file (checked inline by
    `offsets()` and `read_pcap()`, the hot loop); anything else goes through `irregular()`,
    which accepts it, ends the walk (truncated file) or finds the next plausible record.
    """

    __slots__ = ("buf", "size", "header", "unpack", "limit", "frac_limit", "hlen")

    def __init__(self, buf: Buffer, size: int, header: PcapHeader) -> None:
        self.buf = buf
        self.size = size
        self.header = header
        self.unpack = Struct(header.byte_order + "IIII").unpack_from
        self.limit = header.record_limit
        self.frac_limit = 1_000_000_000 if header.nanos else 1_000_000
        self.hlen = header.record_header_len

    def plausible(self, off: int, ref_sec: int | None) -> bool:
        if self.size - off < self.hlen:
            return False
        sec, frac, incl, orig = self.unpack(self.buf, off)
        return (
            frac < self.frac_limit
            and incl <= orig
            and incl <= MAX_RECORD_LEN
            and orig <= MAX_RECORD_LEN
            and off + self.hlen + incl <= self.size
            and (ref_sec is None or abs(sec - ref_sec) <= TS_WINDOW_S)
        )

    def chain_ok(self, off: int, ref_sec: int | None, depth: int = RESYNC_CHAIN) -> bool:
        """True when `depth` plausible records start at off (or the chain ends exactly at EOF)."""
        for _ in range(depth):
            if off == self.size:
                return True
            if not self.plausible(off, ref_sec):
                return False
            sec, _frac, incl, _orig = self.unpack(self.buf, off)
            ref_sec = sec
            off += self.hlen + incl
        return True

    def irregular(self, off: int, ref_sec: int | None) -> tuple[int | None, CaptureAnomaly | None]:
        """Decide on a record header that failed the fast check.

        Returns (offset of the record to read next, anomaly).  When the record itself is
        acceptable the returned offset is `off` and the anomaly None.  None as offset ends the walk.
        """
        if self.size - off < self.hlen:
            detail = f"{self.size - off} bytes left, record header needs {self.hlen}"
            return None, CaptureAnomaly("truncated_file", off, detail)
        sec, frac, incl, orig = self.unpack(self.buf, off)
        header_sane = frac < self.frac_limit and incl <= orig and incl <= MAX_RECORD_LEN
        end = off + self.hlen + incl
        if header_sane and end > self.size:
            detail = f"record claims {incl} bytes, {self.size - off - self.hlen} left"
            return None, CaptureAnomaly("truncated_file", off, detail)
        if header_sane and (end == self.size or self.chain_ok(end, sec, 2)):
            return off, None  # longer than the snaplen announced, but the next record lines up
        detail = f"incl_len={incl} orig_len={orig} frac={frac}"
        found = self.resync(off + 1, ref_sec)
        if found is None:
            return None, CaptureAnomaly("bad_record_length", off, detail + "; no record after it")
        return found, CaptureAnomaly(
            "bad_record_length", off, f"{detail}; resumed at {found} ({found - off} bytes skipped)"
        )

    def resync(self, start: int, ref_sec: int | None) -> int | None:
        """The first offset >= start where a chain of plausible records begins."""
        if ref_sec is None:
            stop = min(self.size, start + RESYNC_BLIND_SCAN)
            for off in range(start, stop):
                if self.chain_ok(off, None):
                    return off
            return None
        # Seconds within a day share their upper 16 bits with the reference or a neighbour:
        # let bytes.find locate candidates instead of testing every offset in Python.
        hi = ref_sec >> 16
        order = self.header.byte_order
        needles = [Struct(order + "H").pack(h & 0xFFFF) for h in (hi - 1, hi, hi + 1)]
        shift = 2 if order == "<" else 0  # where the upper half of ts_sec sits in the header
        positions = [self.buf.find(n, start + shift) for n in needles]
        while True:
            best = min((p for p in positions if p >= 0), default=-1)
            if best < 0:
                return None
            candidate = best - shift
            if self.chain_ok(candidate, ref_sec):
                return candidate
            i = positions.index(best)
            positions[i] = self.buf.find(needles[i], best + 1)

    def offsets(self, start: int, skip: RecordSkip | None = None) -> Iterator[int]:
        """Offsets of the records a reader starting at `start` decodes (used for splitting).

        ``skip(offset, last_sec)``: walks regular records from an offset, these are not
        yielded; it returns where it stopped and the seconds of the last record it walked
        (the splitter's compiled walk, which needs only some of the offsets)."""
        last_sec: int | None = None
        off = start
        while off < self.size:
            if skip is not None:
                off, last_sec = skip(off, last_sec)
                if off >= self.size:
                    return
            if self.size - off >= self.hlen:
                sec, frac, incl, orig = self.unpack(self.buf, off)
                regular = incl <= self.limit and incl <= orig and frac < self.frac_limit
                regular = regular and off + self.hlen + incl <= self.size
            else:
                regular = False
            if not regular:
                nxt, _anomaly = self.irregular(off, last_sec)
                if nxt is None:
                    return
                if nxt != off:
                    off = nxt
                    continue
                sec, frac, incl, orig = self.unpack(self.buf, off)
            yield off
            last_sec = sec
            off += self.hlen + incl


def read_pcap(
    buf: Buffer,
    size: int,
    header: PcapHeader,
    start: int,
    end: int,
    stats: CaptureStats,
    *,
    reads_header: bool | None = None,
    scanner: PacketScanner | None = None,
) -> Iterator[TcpPacket | CaptureAnomaly | PacketScanner]:
    """Yield the TCP packets and anomalies of the records that start in [start, end).

    ``reads_header``: this range is the one that reports the file header's problems (the first
    split of the file); by default, a range starting at the first record.

    ``scanner`` (compiled, `pipeline.ingest.scan`): runs of plain TCP records are read by it
    into its columns, and it is yielded whenever it holds packets; the caller takes them and
    clears it before asking for more. Every other record is read here, in order."""
    records = PcapRecords(buf, size, header)
    decode = decoder_for(header.linktype)
    if reads_header is None:
        reads_header = start <= FILE_HEADER_LEN
    if decode is None and reads_header:
        unknown = CaptureAnomaly("unknown_linktype", 20, f"link type {header.linktype}")
        stats.note(unknown)
        yield unknown
    # The record checks below mirror PcapRecords.offsets(); keep them identical.
    unpack = records.unpack
    limit = records.limit
    frac_limit = records.frac_limit
    hlen = records.hlen
    frac_ns = 1 if header.nanos else 1000
    last_sec: int | None = None
    off = start
    little = header.byte_order == "<"
    while off < end:
        if scanner is not None and decode is not None:
            scanned = scanner.scan_pcap(
                buf, off, end, little, hlen, limit, frac_limit, frac_ns, header.linktype
            )
            if scanned != off:
                off, last_sec = scanned, scanner.last_sec
            if scanner.count:
                yield scanner
            if off >= end:
                return
        if size - off >= hlen:
            sec, frac, incl, orig = unpack(buf, off)
            regular = incl <= limit and incl <= orig and frac < frac_limit
            regular = regular and off + hlen + incl <= size
        else:
            regular = False
        if not regular:
            nxt, anomaly = records.irregular(off, last_sec)
            if anomaly is not None:
                stats.note(anomaly)
                yield anomaly
            if nxt is None:
                return
            if nxt != off:
                off = nxt
                continue
            sec, frac, incl, orig = unpack(buf, off)
        last_sec = sec
        data = off + hlen
        stats.packets += 1
        stats.bytes += incl
        ts_ns = sec * 1_000_000_000 + frac * frac_ns
        result = None if decode is None else decode(buf, data, incl, ts_ns, off)
        if type(result) is TcpPacket and incl == orig and result.payload_len == result.wire_len:
            stats.tcp_packets += 1
            stats.payload_bytes += result.payload_len
            yield result
        else:
            yield from settle(result, incl, orig, off, stats)
        off = data + incl
