"""Mask the ``passcode`` header of a client's CONNECT/STOMP frame in the captured copy.

Sans-IO chunk filter for the client -> broker direction. Chunks are held back (each with its
own read time) until the project's STOMP decoder has framed the first frame; passcode values
in it are then overwritten with same-length filler, so sequence numbers and frame lengths in
the capture stay exactly those of the traffic. Everything after the first frame passes
through untouched. The forwarded bytes are never changed: only the capture copy is.
"""

from __future__ import annotations

import logging

from pipeline.stomp import Decoder, Frame

log = logging.getLogger(__name__)

FILLER = ord("*")
CONNECT_COMMANDS = frozenset({"CONNECT", "STOMP"})
HOLD_LIMIT = 64 << 10
_NAME = b"passcode"


def mask_passcode_lines(buf: bytearray, start: int = 0, end: int | None = None) -> int:
    """Overwrite ``passcode:`` header values in the head of the frame at ``buf[start:end]``;
    returns how many were masked. Stops at the blank line (or NUL) that ends the headers."""
    end = len(buf) if end is None else end
    pos = start
    while pos < end and buf[pos] in b"\r\n":
        pos += 1  # EOLs before the command line
    first = True
    masked = 0
    while pos < end:
        eol = buf.find(b"\n", pos, end)
        line_end = end if eol < 0 else eol
        value_end = line_end - 1 if line_end > pos and buf[line_end - 1] == 0x0D else line_end
        if value_end == pos or b"\0" in buf[pos:line_end]:
            break
        if not first:
            colon = buf.find(b":", pos, value_end)
            if colon > 0 and buf[pos:colon].strip().lower() == _NAME:
                buf[colon + 1 : value_end] = bytes([FILLER]) * (value_end - colon - 1)
                masked += 1
        first = False
        if eol < 0:
            break
        pos = eol + 1
    return masked


class PasscodeMasker:
    """ChunkFilter: ``feed`` returns the (time, bytes) pieces ready to capture."""

    __slots__ = ("_decoder", "_held", "_held_size", "_passing")

    def __init__(self) -> None:
        self._decoder: Decoder | None = Decoder("1.2", lenient=True)
        self._held: list[tuple[int, bytes]] = []
        self._held_size = 0
        self._passing = False

    def feed(self, ts_ns: int, data: bytes) -> list[tuple[int, bytes]]:
        if self._passing:
            return [(ts_ns, data)]
        self._held.append((ts_ns, data))
        self._held_size += len(data)
        frame = self._first_frame(data)
        if frame is not None:
            return self._release(frame)
        if self._held_size > HOLD_LIMIT or (self._decoder is None and self._head_complete()):
            return self._release(None)
        return []

    def _first_frame(self, data: bytes) -> Frame | None:
        if self._decoder is None:
            return None
        try:
            self._decoder.feed(data)
            events = self._decoder.events()
        except Exception:  # a decoder fault must not cost the capture: mask by line instead
            log.exception("STOMP decoder failed while looking for CONNECT; masking by line")
            self._decoder = None
            return None
        return next((event for event in events if isinstance(event, Frame)), None)

    def _head_complete(self) -> bool:
        held = b"".join(data for _, data in self._held).lstrip(b"\r\n")
        return b"\n\n" in held or b"\n\r\n" in held or b"\0" in held

    def flush(self) -> list[tuple[int, bytes]]:
        """Release what is held (at end of stream), masking what looks like a passcode."""
        return [] if self._passing else self._release(None)

    def _release(self, frame: Frame | None) -> list[tuple[int, bytes]]:
        """Mask the held bytes and hand them out with their read times; pass from now on."""
        self._passing = True
        held, self._held = self._held, []
        buf = bytearray(b"".join(data for _, data in held))
        if frame is None:
            mask_passcode_lines(buf)
        elif frame.command.upper() in CONNECT_COMMANDS:
            mask_passcode_lines(buf, frame.start, min(frame.end, len(buf)))
        out: list[tuple[int, bytes]] = []
        pos = 0
        for ts_ns, data in held:
            out.append((ts_ns, bytes(buf[pos : pos + len(data)])))
            pos += len(data)
        return out
