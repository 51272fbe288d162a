"""pcapng blocks: the block types (the one place they are defined: the capture proxy writes with
them too), section and interface context, block walking, recovery after corruption."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from struct import Struct

from pipeline.ingest.fastpath import decoder_for
from pipeline.ingest.records import CaptureAnomaly
from pipeline.ingest.types import Buffer

SHB = 0x0A0D0D0A  # section header block
IDB = 1  # interface description block
OPB = 2  # obsolete packet block
SPB = 3  # simple packet block
ISB = 5  # interface statistics block
EPB = 6  # enhanced packet block
DSB = 0x0000000A  # decryption secrets block
CUSTOM_COPY = 0x00000BAD  # custom block that tools may copy into derived files
CUSTOM_NO_COPY = 0x40000BAD  # custom block that tools must not copy
CUSTOM_BLOCK_TYPES = (CUSTOM_COPY, CUSTOM_NO_COPY)
BYTE_ORDER_MAGIC = 0x1A2B3C4D  # in the SHB, read in the section's byte order
# stomp-capture's record of bytes it forwarded but could not capture (capture/pcapng.py): a
# custom block with IANA's Private Enterprise Number for documentation use (RFC 5612), its
# data starting with this tag, which is what readers match on
STOMP_CAPTURE_PEN = 32473
CAPTURE_LOSS_TAG = b"stomp-capture capture_loss "
RESYNC_NEEDLE_TYPES = (EPB, SPB, IDB, SHB, OPB, ISB)
MAX_BLOCK_LEN = 1 << 26  # a block claiming more is treated as corrupt, not as a truncated file
OPT_COMMENT = 1
OPT_TSRESOL = 9
OPT_TSOFFSET = 14
_BOM = {b"\x4d\x3c\x2b\x1a": "<", b"\x1a\x2b\x3c\x4d": ">"}
MAX_COMMENTS = 1000
MAX_INTERFACES = 1 << 16  # per section; OPBs number interfaces with 16 bits, real files far fewer
MAX_TS_NS = (1 << 63) - 1  # tables hold capture times as int64 nanoseconds since the epoch


def is_pcapng_magic(buf: Buffer, size: int) -> bool:
    return size >= 4 and buf[0:4] == b"\x0a\x0d\x0d\x0a"


@dataclass(slots=True, frozen=True)
class Interface:
    """What decoding a packet of one interface needs; ts_ns = units * mul // div + offset_ns."""

    linktype: int
    snaplen: int
    ts_mul: int = 1000
    ts_div: int = 1
    ts_offset_ns: int = 0


@dataclass(slots=True, frozen=True)
class PcapngContext:
    """Section state in force at some block boundary (carried by splits)."""

    byte_order: str
    section_offset: int
    interfaces: tuple[Interface, ...]
    last_ts_ns: int = 0  # time of the last packet block before: simple packet blocks inherit it


def tsresol_factors(value: int) -> tuple[int, int]:
    """(mul, div) turning if_tsresol units into nanoseconds."""
    exponent = value & 0x7F
    if value & 0x80:
        return 1_000_000_000, 1 << exponent
    if exponent <= 9:
        return 10 ** (9 - exponent), 1
    return 1, 10 ** (exponent - 9)


class PcapngBlocks:
    """Block walking shared by the reader and the splitter, so both visit the same offsets.

    Holds the section context (byte order, interfaces) and updates it from SHB and IDB blocks.
    """

    __slots__ = (
        "buf",
        "size",
        "order",
        "section_offset",
        "interfaces",
        "head",
        "comments",
        "last_ts_ns",
    )

    def __init__(self, buf: Buffer, size: int, context: PcapngContext | None = None) -> None:
        self.buf = buf
        self.size = size
        self.comments: list[tuple[int, str]] = []
        if context is None:
            context = PcapngContext("<", 0, ())
        self.set_order(context.byte_order)
        self.section_offset = context.section_offset
        self.interfaces = list(context.interfaces)
        self.last_ts_ns = context.last_ts_ns

    def set_order(self, order: str) -> None:
        self.order = order
        self.head = Struct(order + "II").unpack_from

    def context(self) -> PcapngContext:
        return PcapngContext(
            self.order, self.section_offset, tuple(self.interfaces), self.last_ts_ns
        )

    def block_len(self, off: int) -> int | None:
        """Length of a well-formed block at off in the current byte order, else None."""
        if self.size - off < 12:
            return None
        btype, blen = self.head(self.buf, off)
        if btype == SHB:
            order = _BOM.get(bytes(self.buf[off + 8 : off + 12]))
            if order is None:
                return None
            blen = Struct(order + "I").unpack_from(self.buf, off + 4)[0]
            trailer = order
        else:
            trailer = self.order
        if blen < 12 or blen & 3 or blen > MAX_BLOCK_LEN or off + blen > self.size:
            return None
        if Struct(trailer + "I").unpack_from(self.buf, off + blen - 4)[0] != blen:
            return None
        return blen

    def irregular(self, off: int) -> tuple[int | None, CaptureAnomaly]:
        """A block at off failed block_len(): report it and find the next block, if any."""
        left = self.size - off
        if left < 12:
            return None, CaptureAnomaly("truncated_file", off, f"{left} bytes left after a block")
        btype, blen = self.head(self.buf, off)
        found = self.resync(off + 4)
        detail = f"block type 0x{btype:x} length {blen}"
        if found is not None:
            detail += f"; resumed at {found} ({found - off} bytes skipped)"
            return found, CaptureAnomaly("bad_block_length", off, detail)
        if 12 <= blen <= MAX_BLOCK_LEN and blen & 3 == 0 and off + blen > self.size:
            return None, CaptureAnomaly("truncated_file", off, detail + f", {left} bytes left")
        return None, CaptureAnomaly("bad_block_length", off, detail + "; no block after it")

    def resync(self, start: int) -> int | None:
        """The first offset >= start holding a block followed by another one (or the end).

        Candidates are found by their block type; all but SHBs must sit on the section's
        4-byte alignment.
        """
        needles = [Struct(self.order + "I").pack(t) for t in RESYNC_NEEDLE_TYPES]
        positions = [self.buf.find(n, start) for n in needles]
        while True:
            best = min((p for p in positions if p >= 0), default=-1)
            if best < 0:
                return None
            i = positions.index(best)
            positions[i] = self.buf.find(needles[i], best + 1)
            btype = RESYNC_NEEDLE_TYPES[i]
            if btype == SHB:
                if self.block_len(best) is not None:  # byte-order magic + both lengths agree
                    return best
                continue
            if (best - self.section_offset) % 4:
                continue
            blen = self.block_len(best)
            if blen is None or not self._plausible(best, btype, blen):
                continue
            after = best + blen
            if after == self.size or self.block_len(after) is not None:
                return best

    def _plausible(self, off: int, btype: int, blen: int) -> bool:
        """Fields of a resync candidate that a real block of this section would have."""
        if btype in (EPB, OPB, ISB):
            fields = "I" if btype != OPB else "H"
            iface = Struct(self.order + fields).unpack_from(self.buf, off + 8)[0]
            if iface >= len(self.interfaces):
                return False
        if btype in (EPB, OPB):
            incl = Struct(self.order + "I").unpack_from(self.buf, off + 20)[0]
            return blen >= 32 and 32 + incl <= blen
        return True

    def section(self, off: int, blen: int) -> None:
        """Start a new section at an SHB."""
        self.set_order(_BOM[bytes(self.buf[off + 8 : off + 12])])
        self.section_offset = off
        self.interfaces = []
        self.read_comments(off + 24, off + blen - 4)

    def interface(self, off: int, blen: int) -> Interface:
        """Add the interface an IDB describes."""
        linktype, _reserved, snaplen = Struct(self.order + "HHI").unpack_from(self.buf, off + 8)
        mul, div, offset_ns = 1000, 1, 0  # microseconds unless if_tsresol says otherwise
        for code, value, length in self.options(off + 16, off + blen - 4):
            if code == OPT_TSRESOL and length >= 1:
                mul, div = tsresol_factors(self.buf[value])
            elif code == OPT_TSOFFSET and length == 8:
                offset_ns = Struct(self.order + "q").unpack_from(self.buf, value)[0] * 10**9
        iface = Interface(linktype, snaplen, mul, div, offset_ns)
        self.interfaces.append(iface)
        return iface

    def read_comments(self, off: int, stop: int) -> None:
        """Walk options only for their comments."""
        for _option in self.options(off, stop):
            pass

    def options(self, off: int, stop: int) -> Iterator[tuple[int, int, int]]:
        """(code, value offset, length) of the options in [off, stop); keeps the comments."""
        opt = Struct(self.order + "HH").unpack_from
        while off + 4 <= stop:
            code, length = opt(self.buf, off)
            value = off + 4
            if code == 0 or value + length > stop:
                return
            if code == OPT_COMMENT and len(self.comments) < MAX_COMMENTS:
                text = bytes(self.buf[value : value + length]).decode("utf-8", "replace")
                self.comments.append((off, text))
            yield code, value, length
            off = value + ((length + 3) & ~3)

    def next_block(self, off: int) -> tuple[int | None, CaptureAnomaly | None, int, int]:
        """Read the block at off for walking: (next offset, anomaly, type, length).

        SHB and IDB update the context; a corrupt block yields its anomaly and the next offset
        found by resync (type and length are then 0).
        """
        blen = self.block_len(off)
        if blen is None:
            nxt, corrupt = self.irregular(off)
            return nxt, corrupt, 0, 0
        btype = self.head(self.buf, off)[0]
        anomaly = None
        if btype == SHB:
            self.section(off, blen)
        elif btype == IDB:
            if blen < 20:
                anomaly = CaptureAnomaly("bad_block_length", off, f"IDB of {blen} bytes")
            elif len(self.interfaces) >= MAX_INTERFACES:  # memory stays bounded
                detail = f"section already has {MAX_INTERFACES} interfaces; IDB ignored"
                anomaly = CaptureAnomaly("too_many_interfaces", off, detail)
            else:
                iface = self.interface(off, blen)
                if decoder_for(iface.linktype) is None:
                    detail = f"link type {iface.linktype} on interface {len(self.interfaces) - 1}"
                    anomaly = CaptureAnomaly("unknown_linktype", off, detail)
        elif btype in (EPB, OPB):
            ts_ns = self.packet_time(off, btype, blen)
            if ts_ns is not None:
                self.last_ts_ns = ts_ns
        return off + blen, anomaly, btype, blen

    def capture_loss(self, off: int, blen: int) -> CaptureAnomaly | None:
        """A custom block written by stomp-capture where capture data was lost, as a
        ``capture_loss`` anomaly (connection, direction, sequence, bytes in the detail)."""
        if blen < 16 + len(CAPTURE_LOSS_TAG):
            return None
        if Struct(self.order + "I").unpack_from(self.buf, off + 8)[0] != STOMP_CAPTURE_PEN:
            return None
        data = bytes(self.buf[off + 12 : off + blen - 4]).rstrip(b"\0")
        if not data.startswith(CAPTURE_LOSS_TAG):
            return None
        detail = data[len(CAPTURE_LOSS_TAG) :].decode("utf-8", "replace")
        return CaptureAnomaly("capture_loss", off, detail)

    def packet_fields(
        self, off: int, btype: int, blen: int
    ) -> tuple[int, int, int, int] | CaptureAnomaly:
        """(interface, timestamp units, captured length, original length) of an EPB / OPB."""
        if blen < 32:
            return CaptureAnomaly("bad_block_length", off, f"packet block of {blen} bytes")
        if btype == EPB:
            fields = Struct(self.order + "IIIII").unpack_from(self.buf, off + 8)
            iface_id, ts_hi, ts_lo, incl, orig = fields
        else:
            fields = Struct(self.order + "HHIIII").unpack_from(self.buf, off + 8)
            iface_id, _drops, ts_hi, ts_lo, incl, orig = fields
        if iface_id >= len(self.interfaces):
            return CaptureAnomaly("unknown_interface", off, f"interface {iface_id} not described")
        if 32 + incl > blen:
            return CaptureAnomaly("bad_block_length", off, f"captured length {incl} exceeds block")
        return iface_id, (ts_hi << 32) | ts_lo, incl, orig

    def packet_time(self, off: int, btype: int, blen: int) -> int | None:
        """Capture time of a well-formed EPB / OPB when a table can hold it (what a reader takes
        as the time of the simple packet blocks after it), else None."""
        fields = self.packet_fields(off, btype, blen)
        if isinstance(fields, CaptureAnomaly):
            return None
        iface = self.interfaces[fields[0]]
        ts_ns = fields[1] * iface.ts_mul // iface.ts_div + iface.ts_offset_ns
        return ts_ns if 0 <= ts_ns <= MAX_TS_NS else None

    def offsets(self, start: int, skip: Callable[[int], int] | None = None) -> Iterator[int]:
        """Offsets of the blocks a reader starting at `start` visits (used for splitting).

        The context at each yielded offset is the one in force before that block. ``skip``:
        walks blocks from an offset that `next_block` would only step over (keeping the
        context's last packet time), these are not yielded; returns where it stopped (the
        splitter's compiled walk, which needs only some of the offsets).
        """
        off: int | None = start
        while off is not None and off < self.size:
            if skip is not None:
                off = skip(off)
                if off >= self.size:
                    return
            yield off
            off = self.next_block(off)[0]
