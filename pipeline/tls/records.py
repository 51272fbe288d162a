"""TLS records cut out of one direction's TCP byte stream (sans-IO): bytes in, whole records out,
each with the TCP offset of its header. Holds at most one record's bytes."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.compiled import set_slot_values, slot_values

CHANGE_CIPHER_SPEC = 20
ALERT = 21
HANDSHAKE = 22
APPLICATION_DATA = 23
HEARTBEAT = 24
CONTENT_TYPES = frozenset({CHANGE_CIPHER_SPEC, ALERT, HANDSHAKE, APPLICATION_DATA, HEARTBEAT})

HEADER_LENGTH = 5
# TLSCiphertext may exceed 2^14 by 2048 bytes in TLS 1.2 (RFC 5246 6.2.3), 256 in TLS 1.3
MAX_FRAGMENT = (1 << 14) + 2048


@dataclass(slots=True)  # not frozen: made once a record, and frozen costs 3x to make
class Record:
    content_type: int
    version: int
    header: bytes
    fragment: bytes
    tcp_offset: int  # where its header starts in the direction's TCP stream


@dataclass(frozen=True, slots=True)
class NotTls:
    """The bytes at `tcp_offset` cannot start a TLS record: the stream is not (or no longer) TLS."""

    tcp_offset: int
    reason: str


class RecordReader:
    """One direction's records. `feed` takes bytes in stream order and returns the records they
    complete; at a header no TLS peer sends it stops for good and says where (`failure`)."""

    __slots__ = ("_buffer", "_offset", "failure")

    def __init__(self, tcp_offset: int = 0) -> None:
        self._buffer = bytearray()
        self._offset = tcp_offset  # TCP offset of _buffer[0]
        self.failure: NotTls | None = None

    def __getstate__(self) -> tuple[None, dict[str, object]]:
        return slot_values(self)

    def __setstate__(self, state: tuple[None, dict[str, object]]) -> None:
        set_slot_values(self, state)

    @property
    def held(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes) -> list[Record]:
        if self.failure is not None:
            return []
        if self._buffer:
            self._buffer += data
            source: bytes | bytearray = self._buffer
        else:
            source = data  # the usual case: records read from the new bytes, no copy first
        records: list[Record] = []
        start = 0
        size = len(source)
        while size - start >= HEADER_LENGTH:
            content_type = source[start]
            length = (source[start + 3] << 8) | source[start + 4]
            if content_type not in CONTENT_TYPES or source[start + 1] != 3:
                version = (source[start + 1] << 8) | source[start + 2]
                reason = f"content type {content_type}, version 0x{version:04x}"
                return self._stop(start, records, reason)
            if length > MAX_FRAGMENT:
                reason = f"record of {length} bytes (at most {MAX_FRAGMENT})"
                return self._stop(start, records, reason)
            end = start + HEADER_LENGTH + length
            if end > size:
                break
            header = bytes(source[start : start + HEADER_LENGTH])
            version = (header[1] << 8) | header[2]
            fragment = bytes(source[start + HEADER_LENGTH : end])
            records.append(Record(content_type, version, header, fragment, self._offset + start))
            start = end
        if start or source is data:  # what is left of a record to come, kept
            self._buffer = bytearray(source[start:])
        self._offset += start
        return records

    def take(self) -> tuple[bytes, int]:
        """The bytes held (part of a record to come) and the TCP offset of the first, let go:
        `pipeline.tls.bulk` reads them with the bytes that follow, and gives back with `hold`
        what it leaves."""
        if not self._buffer:
            return b"", self._offset
        held, self._buffer = bytes(self._buffer), bytearray()
        return held, self._offset

    def hold(self, rest: bytes, tcp_offset: int) -> None:
        """``rest``, at ``tcp_offset`` in the TCP stream, is what the next `feed` continues."""
        if rest:
            self._buffer = bytearray(rest)
        self._offset = tcp_offset

    def _stop(self, start: int, records: list[Record], reason: str) -> list[Record]:
        self.failure = NotTls(self._offset + start, reason)
        self._buffer = bytearray()
        return records
