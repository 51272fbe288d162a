"""Pure pcapng block encoder (little endian): section header, interface, enhanced packet.

Blocks are returned as tuples of byte parts so a packet payload is never copied before it
reaches ``os.writev``; ``b"".join(parts)`` gives the block bytes.
"""

from __future__ import annotations

import struct

from pipeline.ingest.pcapng_blocks import (
    BYTE_ORDER_MAGIC,
    CAPTURE_LOSS_TAG,
    CUSTOM_COPY,
    EPB,
    IDB,
    OPT_COMMENT,
    OPT_TSRESOL,
    SHB,
    STOMP_CAPTURE_PEN,
)

LINKTYPE_ETHERNET = 1

OPT_END = 0
SHB_USERAPPL = 4
IF_NAME = 2

_PAD = (b"", b"\x00\x00\x00", b"\x00\x00", b"\x00")
_EPB_HEAD = struct.Struct("<IIIIIII")
_U32 = struct.Struct("<I")

Parts = tuple[bytes | memoryview, ...]


def _padding(length: int) -> bytes:
    return _PAD[length % 4]


def encode_options(options: list[tuple[int, bytes]]) -> bytes:
    """Options as TLV records ending with opt_endofopt; empty bytes when there are none."""
    if not options:
        return b""
    out = bytearray()
    for code, value in options:
        out += struct.pack("<HH", code, len(value)) + value + _padding(len(value))
    out += struct.pack("<HH", OPT_END, 0)
    return bytes(out)


def _block(block_type: int, body: bytes) -> bytes:
    total = 12 + len(body)
    return struct.pack("<II", block_type, total) + body + _U32.pack(total)


def section_header_block(user_application: str = "", comment: str = "") -> bytes:
    options: list[tuple[int, bytes]] = []
    if comment:
        options.append((OPT_COMMENT, comment.encode()))
    if user_application:
        options.append((SHB_USERAPPL, user_application.encode()))
    # section length -1: unknown, the file is written as a stream
    body = struct.pack("<IHHq", BYTE_ORDER_MAGIC, 1, 0, -1) + encode_options(options)
    return _block(SHB, body)


def interface_description_block(
    linktype: int = LINKTYPE_ETHERNET, snaplen: int = 0, name: str = ""
) -> bytes:
    """Interface with nanosecond timestamps (if_tsresol = 9: 10^-9 s)."""
    options: list[tuple[int, bytes]] = [(OPT_TSRESOL, b"\x09")]
    if name:
        options.append((IF_NAME, name.encode()))
    body = struct.pack("<HHI", linktype, 0, snaplen) + encode_options(options)
    return _block(IDB, body)


def enhanced_packet_block_parts(
    ts_ns: int,
    packet: Parts,
    interface_id: int = 0,
    comment: str = "",
) -> Parts:
    """One EPB as parts: fixed header, the packet parts unchanged, padding + options + trailer.
    The block's total length is ``block_length(parts)``."""
    captured = 0
    for part in packet:
        captured += len(part)
    options = encode_options([(OPT_COMMENT, comment.encode())]) if comment else b""
    total = 32 + captured + (-captured % 4) + len(options)
    head = _EPB_HEAD.pack(
        EPB, total, interface_id, ts_ns >> 32, ts_ns & 0xFFFFFFFF, captured, captured
    )
    tail = _padding(captured) + options + _U32.pack(total)
    return (head, *packet, tail)


def block_length(parts: Parts) -> int:
    """Total length of a block given as parts, read from its header."""
    return _U32.unpack_from(parts[0], 4)[0]


def enhanced_packet_block(
    ts_ns: int, packet: bytes, interface_id: int = 0, comment: str = ""
) -> bytes:
    return b"".join(enhanced_packet_block_parts(ts_ns, (packet,), interface_id, comment))


def custom_block(pen: int, data: bytes) -> bytes:
    """A copyable custom block: PEN, then ``data`` padded to 32 bits (no options)."""
    return _block(CUSTOM_COPY, _U32.pack(pen) + data + _padding(len(data)))


def capture_loss_block(detail: str) -> bytes:
    """Marks bytes that were forwarded but are missing from the capture, where they went
    missing: ``detail`` is ``key=value`` pairs (connection, direction, sequence, bytes)."""
    return custom_block(STOMP_CAPTURE_PEN, CAPTURE_LOSS_TAG + detail.encode())


def file_header(user_application: str = "stomp-capture", comment: str = "") -> bytes:
    """What every capture file starts with: one section, one Ethernet interface."""
    return section_header_block(user_application, comment) + interface_description_block(
        name="stomp-capture"
    )
