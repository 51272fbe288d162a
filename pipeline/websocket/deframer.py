"""RFC 6455 frames of one direction, read incrementally: TCP bytes in, STOMP bytes, control
frames and violations out (sans-IO).

The payload of a data frame is handed on as it arrives, piece by piece, so a large frame is never
held whole; control frames (at most 125 bytes by the RFC) are collected until complete. A
violation is reported and the frame still read as well as it can be (see ``violations``): the
only thing that stops a direction is losing the frame boundaries (a 64-bit length with the top
bit set, or a capture gap outside an uncompressed data payload).
"""

from __future__ import annotations

import codecs
import struct

from pipeline.net import Direction
from pipeline.websocket import violations as v
from pipeline.websocket.deflate import InflateError, Inflater
from pipeline.websocket.events import Control, Event, StompData, StompGap, Violation
from pipeline.websocket.handshake import Deflate

CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
DATA_OPCODES = frozenset({CONTINUATION, TEXT, BINARY})
CONTROL_OPCODES = {CLOSE: "close", PING: "ping", PONG: "pong"}
MAX_CONTROL_KEPT = 4096  # a (bad) control frame longer than this keeps only its start
_UTF8 = codecs.getincrementaldecoder("utf-8")


def valid_close_code(code: int) -> bool:
    """Codes an endpoint may send (RFC 6455 7.4, IANA registry): 1000-1003, 1007-1014,
    3000-4999. 1004-1006 and 1015 are reserved or local only; the rest is undefined."""
    return 1000 <= code <= 1003 or 1007 <= code <= 1014 or 3000 <= code <= 4999


def unmask(data: bytes, key: bytes, phase: int) -> bytes:
    """XOR ``data`` with the masking key, starting ``phase`` bytes into it."""
    size = len(data)
    if phase:
        key = key[phase:] + key[:phase]
    mask = (key * (size // 4 + 1))[:size]
    return (int.from_bytes(data, "little") ^ int.from_bytes(mask, "little")).to_bytes(
        size, "little"
    )


def header_size(head: bytes | bytearray) -> int:
    """Bytes the frame header starting with ``head`` takes (2 while the first two are unknown)."""
    if len(head) < 2:
        return 2
    short = head[1] & 0x7F
    return 2 + (2 if short == 126 else 8 if short == 127 else 0) + (4 if head[1] & 0x80 else 0)


class _Frame:
    __slots__ = ("opcode", "fin", "key", "length", "done", "start", "skip", "control")

    def __init__(self, opcode: int, fin: bool, key: bytes | None, length: int, start: int) -> None:
        self.opcode = opcode
        self.fin = fin
        self.key = key
        self.length = length
        self.done = 0
        self.start = start  # TCP offset of the frame's first header byte
        self.skip = False  # payload read past, not used
        self.control: bytearray | None = bytearray() if opcode in CONTROL_OPCODES else None


class Deframer:
    """One direction's frames. ``feed`` the TCP bytes in order; each call returns the events
    the bytes completed."""

    __slots__ = (
        "direction",
        "from_client",
        "inflater",
        "tcp_offset",
        "stomp_offset",
        "stopped",
        "closed",
        "_head",
        "_frame",
        "_message",
        "_compressed",
        "_utf8",
        "_text",
        "_first_piece",
        "_inflate_broken",
        "_failed_at",
        "_skipped",
        "_out",
        "_ts",
        "_pending",
    )

    def __init__(
        self, direction: Direction, *, from_client: bool, deflate: Deflate | None, tcp_offset: int
    ) -> None:
        self.direction = direction
        self.from_client = from_client
        self.inflater: Inflater | None = None
        if deflate is not None:
            takeover_off = (
                deflate.client_no_context_takeover
                if from_client
                else deflate.server_no_context_takeover
            )
            self.inflater = Inflater(takeover_off)
        self.tcp_offset = tcp_offset  # of the next byte fed
        self.stomp_offset = 0
        self.stopped = False
        self.closed = False  # this side sent a close frame
        self._head = bytearray()
        self._frame: _Frame | None = None
        self._message: int | None = None  # opcode of the open data message
        self._compressed = False
        self._utf8: codecs.IncrementalDecoder | None = None  # once a text message is not ASCII
        self._text = False  # the open message is text, not yet found invalid
        self._first_piece = True  # the next STOMP bytes are the first of their message
        self._inflate_broken = False  # with context takeover, for good: the window is lost
        self._failed_at = 0  # TCP offset of the message whose inflation failed
        self._skipped = 0  # compressed messages skipped since
        self._out: list[Event] = []
        self._ts = 0
        self._pending: list[tuple[int, int, bytes]] = []  # (stomp_offset, tcp_offset, bytes)

    # ---- input ---------------------------------------------------------------------------------

    def feed(self, data: bytes, ts_ns: int) -> list[Event]:
        self._ts = ts_ns
        out = self._out = []
        if self.stopped:
            self.tcp_offset += len(data)
            return out
        position, size = 0, len(data)
        while position < size and not self.stopped:
            frame = self._frame
            if frame is None:
                if not self._head and self._message is None and not self.closed:
                    position = self._whole_messages(data, position, size)
                    if position == size or self._frame is not None:
                        continue
                position = self._read_header(data, position)
                continue
            remaining = frame.length - frame.done
            take = min(remaining, size - position)
            piece = data[position : position + take]
            position += take
            self._payload(frame, piece, frame.done + take == frame.length)
        self.tcp_offset += size
        self._flush()
        return out

    def feed_gap(self, size: int, ts_ns: int) -> list[Event]:
        """``size`` bytes missing from the capture at the current offset."""
        self._ts = ts_ns
        out = self._out = []
        frame = self._frame
        at = self.tcp_offset
        self.tcp_offset += size
        if self.stopped:
            return out
        if (
            frame is not None
            and frame.control is None
            and not frame.skip
            and not self._compressed
            and frame.length - frame.done >= size
        ):
            frame.done += size  # the mask phase follows frame.done
            self._flush()
            out.append(StompGap(self.direction, ts_ns, self.stomp_offset, size))
            self.stomp_offset += size
            self._first_piece = False
            if frame.done == frame.length:
                self._end_frame(frame)
            return out
        self._violation(v.GAP, at, f"{size} bytes missing: frame boundaries lost, decoding stops")
        self.stopped = True
        return out

    def feed_eof(self, ts_ns: int) -> list[Event]:
        self._ts = ts_ns
        out = self._out = []
        if not self.stopped and (self._head or self._frame is not None):
            start = (
                self._frame.start if self._frame is not None else self.tcp_offset - len(self._head)
            )
            self._violation(v.TRUNCATED_FRAME, start, "the direction ended inside a frame")
        self.stopped = True
        return out

    # ---- frames --------------------------------------------------------------------------------

    def _whole_messages(self, data: bytes, position: int, size: int) -> int:
        """The common case in one loop: frames that are whole messages (FIN, text or binary,
        RSV1 only with permessage-deflate, masked as the side must, minimal length) and lie in
        ``data`` whole, with no message open. Returns where it stopped: at the first frame that
        is anything else, which the general path (``_read_header`` on) takes, or at the payload
        of a frame that goes on in later data, with the frame started as that path would.
        The per-message state (``_compressed``, ``_first_piece``, ``_text``) is left alone: it
        is read only while a message is open, and every message opens through
        ``_open_message``."""
        masked_bit = 0x80 if self.from_client else 0
        inflater = self.inflater
        deflate = inflater is not None
        pending = self._pending
        base = self.tcp_offset
        while size - position >= 2:
            first, second = data[position], data[position + 1]
            compressed = first & 0x40
            if (first & 0xBF) not in (0x81, 0x82) or (compressed and not deflate):
                break
            if second & 0x80 != masked_bit:
                break
            short = second & 0x7F
            if short < 126:
                length, at = short, position + 2
            elif short == 126:
                if size - position < 4:
                    break
                length, at = (data[position + 2] << 8) | data[position + 3], position + 4
                if length < 126:
                    break
            else:
                if size - position < 10:
                    break
                length = int.from_bytes(data[position + 2 : position + 10], "big")
                at = position + 10
                if length >> 63 or length < 65536:
                    break
            end = at + length + (4 if masked_bit else 0)
            if end > size:
                body = at + 4 if masked_bit else at
                if body <= size:  # the header is here: the payload goes on in later data
                    key = data[at:body] if masked_bit else None
                    self._frame = _Frame(first & 0x0F, True, key, length, base + position)
                    self._open_message(
                        first & 0x0F, compressed=bool(compressed), start=base + position
                    )
                    position = body
                break
            start = base + position
            if masked_bit:
                payload = unmask(data[at + 4 : end], data[at : at + 4], 0) if length else b""
            else:
                payload = data[at:end]
            position = end
            if compressed:
                if inflater is None:
                    payload = self._inflate(payload, start, True)
                elif not self._may_inflate():
                    payload = b""
                    self._skip_message(start)
                else:  # _inflate's first branch, inline
                    try:
                        payload = inflater.end_message(payload)
                    except InflateError as error:
                        payload = b""
                        self._inflate_failed(error, start)
            if first & 0x0F == TEXT and payload and not payload.isascii():
                self._check_utf8(payload, start, final=False)
                if self._utf8 is not None:
                    self._check_utf8(b"", start, final=True)
                self._utf8 = None
            if not payload:
                continue
            offset = self.stomp_offset
            if payload.strip(b"\r\n"):
                pending.append((offset, start, payload))
            else:  # a message of EOLs only: a heart-beat, on its own
                self._flush()
                self._out.append(StompData(self.direction, self._ts, offset, start, payload, True))
            self.stomp_offset = offset + len(payload)
        return position

    def _read_header(self, data: bytes, position: int) -> int:
        head = self._head
        had = len(head)
        head += data[position : position + 14 - had]
        need = header_size(head)
        if len(head) < need:
            return position + len(head) - had
        raw = bytes(head[:need])
        head.clear()
        start = self.tcp_offset + position - had
        self._start_frame(raw, start)
        return position + need - had

    def _start_frame(self, raw: bytes, start: int) -> None:
        first, second = raw[0], raw[1]
        fin = bool(first & 0x80)
        opcode = first & 0x0F
        masked = bool(second & 0x80)
        short = second & 0x7F
        if short == 126:
            (length,) = struct.unpack_from("!H", raw, 2)
            if length < 126:
                self._violation(v.NON_MINIMAL_LENGTH, start, f"{length} in the 16-bit form")
            key_at = 4
        elif short == 127:
            (length,) = struct.unpack_from("!Q", raw, 2)
            if length >> 63:
                self._violation(v.BAD_LENGTH, start, "64-bit length with the top bit set")
                self.stopped = True
                return
            if length < 65536:
                self._violation(v.NON_MINIMAL_LENGTH, start, f"{length} in the 64-bit form")
            key_at = 10
        else:
            length, key_at = short, 2
        key = raw[key_at : key_at + 4] if masked else None
        if self.from_client and not masked:
            self._violation(v.UNMASKED_CLIENT_FRAME, start, "client frame without a mask")
        elif masked and not self.from_client:
            self._violation(v.MASKED_SERVER_FRAME, start, "server frame with a mask")
        frame = _Frame(opcode, fin, key, length, start)
        self._frame = frame
        self._check_frame(frame, first & 0x70)
        if length == 0:
            self._payload(frame, b"", True)

    def _check_frame(self, frame: _Frame, rsv: int) -> None:
        opcode, start = frame.opcode, frame.start
        rsv1 = bool(rsv & 0x40)
        if rsv & 0x30:
            self._violation(v.RESERVED_BITS, start, f"RSV2/RSV3 set (opcode {opcode:#x})")
        if opcode in CONTROL_OPCODES:
            if not frame.fin or frame.length > 125:
                detail = f"{CONTROL_OPCODES[opcode]} frame, fin={frame.fin}, length {frame.length}"
                self._violation(v.BAD_CONTROL_FRAME, start, detail)
            if rsv1:
                self._violation(v.RESERVED_BITS, start, "RSV1 on a control frame")
            return
        if opcode not in DATA_OPCODES:
            self._violation(v.BAD_OPCODE, start, f"reserved opcode {opcode:#x}: frame skipped")
            frame.skip = True
            return
        if self.closed:
            self._violation(v.DATA_AFTER_CLOSE, start, "data frame after this side's close")
            frame.skip = True
            return
        if opcode == CONTINUATION:
            if rsv1:
                self._violation(v.RESERVED_BITS, start, "RSV1 on a continuation frame")
            if self._message is None:
                self._violation(v.UNEXPECTED_CONTINUATION, start, "no fragmented message open")
                self._open_message(BINARY, compressed=False)
            return
        if self._message is not None:
            self._violation(v.EXPECTED_CONTINUATION, start, "new message inside a fragmented one")
            self._close_message(start)
        if rsv1 and self.inflater is None:
            self._violation(v.RESERVED_BITS, start, "RSV1 without permessage-deflate")
        self._open_message(opcode, compressed=rsv1 and self.inflater is not None, start=start)

    def _open_message(self, opcode: int, *, compressed: bool, start: int = 0) -> None:
        if compressed and not self._may_inflate():
            self._skip_message(start)
        self._message = opcode
        self._compressed = compressed
        self._text = opcode == TEXT
        self._utf8 = None
        self._first_piece = True

    def _payload(self, frame: _Frame, piece: bytes, last: bool) -> None:
        if piece and frame.key is not None:
            piece = unmask(piece, frame.key, frame.done & 3)
        frame.done += len(piece)
        if frame.control is not None:
            if len(frame.control) < MAX_CONTROL_KEPT:
                frame.control += piece[: MAX_CONTROL_KEPT - len(frame.control)]
        elif not frame.skip:
            self._data(frame, piece, last)
        if last:
            self._end_frame(frame)

    def _data(self, frame: _Frame, piece: bytes, last_of_frame: bool) -> None:
        ends_message = last_of_frame and frame.fin
        if self._compressed:
            piece = self._inflate(piece, frame.start, ends_message)
        if self._text and piece and (self._utf8 is not None or not piece.isascii()):
            self._check_utf8(piece, frame.start, final=False)
        if ends_message and self._utf8 is not None:
            self._check_utf8(b"", frame.start, final=True)
        if piece:
            offset = self.stomp_offset
            if self._first_piece and ends_message and not piece.strip(b"\r\n"):
                self._flush()  # a message of EOLs only: a heart-beat, on its own
                beat = StompData(self.direction, self._ts, offset, frame.start, piece, True)
                self._out.append(beat)
            else:
                self._pending.append((offset, frame.start, piece))
            self.stomp_offset += len(piece)
            self._first_piece = False

    def _inflate(self, piece: bytes, start: int, ends_message: bool) -> bytes:
        inflater = self.inflater
        assert inflater is not None
        out = b""
        if not self._inflate_broken:
            try:
                if ends_message:
                    out = inflater.end_message(piece)
                else:
                    out = inflater.feed(piece) if piece else b""
            except InflateError as error:
                self._inflate_failed(error, start)
        return out

    def _may_inflate(self) -> bool:
        """Whether a compressed message that starts now can be inflated: yes unless one failed
        before it with context takeover (the window it needs is lost). Without context takeover
        every message starts a fresh stream, however the failed one ended (its final frame, a
        new message inside it, or both in the fast path or the general one)."""
        inflater = self.inflater
        if self._inflate_broken and inflater is not None and inflater.no_context_takeover:
            inflater.reset()
            self._inflate_broken = False
        return not self._inflate_broken

    def _inflate_failed(self, error: InflateError, start: int) -> None:
        self._violation(v.INFLATE_FAILED, start, str(error))
        self._inflate_broken = True
        self._failed_at = start
        self._skipped = 0

    def _skip_message(self, start: int) -> None:
        """A compressed message after a failure with context takeover: its window is lost, so
        it is not inflated, but it is told (how many so far, where the failure was)."""
        self._skipped += 1
        detail = (
            f"compressed message {self._skipped} since the inflate failure at TCP offset "
            f"{self._failed_at}: context takeover, window lost, not inflated"
        )
        self._violation(v.INFLATE_SKIPPED, start, detail)

    def _check_utf8(self, piece: bytes, start: int, *, final: bool) -> None:
        """Text messages must be UTF-8; an ASCII-only message never builds a decoder."""
        if self._utf8 is None:
            self._utf8 = _UTF8()
        try:
            self._utf8.decode(piece, final)
        except UnicodeDecodeError as error:
            self._violation(v.INVALID_UTF8, start, f"text message: {error.reason}")
            self._utf8 = None
            self._text = False  # once per message

    def _end_frame(self, frame: _Frame) -> None:
        self._frame = None
        if frame.control is not None:
            self._control(frame)
        elif not frame.skip and frame.fin:
            self._message = None
            self._utf8 = None
            self._text = False
        elif frame.skip and frame.fin and frame.opcode in DATA_OPCODES:
            self._message = None

    def _close_message(self, start: int) -> None:
        """A fragmented message ended without its final frame."""
        if self._compressed and self.inflater is not None and not self._inflate_broken:
            self._inflate(b"", start, True)
        self._message = None
        self._utf8 = None
        self._text = False

    def _control(self, frame: _Frame) -> None:
        payload = bytes(frame.control or b"")
        kind = CONTROL_OPCODES[frame.opcode]
        code = reason = None
        if frame.opcode == CLOSE:
            self.closed = True
            if len(payload) == 1:
                self._violation(v.INVALID_CLOSE, frame.start, "close payload of one byte")
            elif payload:
                (code,) = struct.unpack_from("!H", payload)
                if not valid_close_code(code):
                    self._violation(v.INVALID_CLOSE, frame.start, f"close code {code}")
                try:
                    reason = payload[2:].decode("utf-8")
                except UnicodeDecodeError:
                    self._violation(v.INVALID_CLOSE, frame.start, "close reason is not UTF-8")
                    reason = payload[2:].decode("utf-8", "replace")
        control = Control(
            self.direction, self._ts, frame.start, kind, frame.length, payload, code, reason
        )
        self._flush()
        self._out.append(control)

    def _violation(self, kind: str, tcp_offset: int, detail: str) -> None:
        self._flush()
        event = Violation(self.direction, self._ts, tcp_offset, self.stomp_offset, kind, detail)
        self._out.append(event)

    def _flush(self) -> None:
        """Pending STOMP pieces become one StompData (fewer, larger chunks for the model)."""
        pending = self._pending
        if not pending:
            return
        stomp_offset, tcp_offset, data = pending[0]
        if len(pending) == 1:
            event = StompData(self.direction, self._ts, stomp_offset, tcp_offset, data, False)
        else:
            # each piece a frame of its own but for a frame's pieces split by a flush
            frames = tuple(
                [
                    (start, tcp)
                    for (start, tcp, _), (_, before, _) in zip(pending[1:], pending, strict=False)
                    if tcp != before
                ]
            )
            joined = b"".join([piece for _, _, piece in pending])
            event = StompData(
                self.direction, self._ts, stomp_offset, tcp_offset, joined, False, frames
            )
        self._out.append(event)
        pending.clear()
