"""permessage-deflate (RFC 7692) inflation of one direction's messages, with zlib.

Each compressed message is a raw DEFLATE stream cut after a sync flush, its trailing
``00 00 ff ff`` removed; the receiver appends it back at the end of the message. With context
takeover the sliding window carries over to the next message; without it, each message starts
fresh. The inflater always uses a 15-bit window, which reads data compressed with any smaller
window the sides agreed on.
"""

from __future__ import annotations

import zlib

MESSAGE_TAIL = b"\x00\x00\xff\xff"
MAX_PIECE = 1 << 20  # inflate in steps of at most this many bytes ...
MAX_MESSAGE = 256 << 20  # ... and give up on a message that inflates beyond this


class InflateError(Exception):
    """The compressed data is invalid, or inflates beyond MAX_MESSAGE."""


class Inflater:
    """Pickled (a connection carried to the next batch), it keeps its settings but not zlib's
    window, which cannot be saved: with context takeover, once data was inflated, the next
    compressed message fails as ``InflateError`` (reported, not guessed)."""

    __slots__ = ("no_context_takeover", "_zlib", "_message_bytes", "_used", "_window_lost")

    def __init__(self, no_context_takeover: bool) -> None:
        self.no_context_takeover = no_context_takeover
        self._zlib = zlib.decompressobj(-15)
        self._message_bytes = 0
        self._used = False
        self._window_lost = False

    def __getstate__(self) -> dict[str, object]:
        lost = self._window_lost or (self._used and not self.no_context_takeover)
        return {"no_context_takeover": self.no_context_takeover, "window_lost": lost}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__init__(bool(state["no_context_takeover"]))  # type: ignore[misc]
        self._window_lost = bool(state["window_lost"])

    def feed(self, data: bytes) -> bytes:
        """Inflate part of a compressed message's payload."""
        return self._inflate(data)

    def end_message(self, data: bytes = b"") -> bytes:
        """Inflate the message's last ``data`` and end it; resets the window without context
        takeover."""
        try:
            return self._inflate(data + MESSAGE_TAIL)
        finally:
            self._message_bytes = 0
            if self.no_context_takeover:
                self._zlib = zlib.decompressobj(-15)

    def reset(self) -> None:
        """Start over (after a failure in a direction without context takeover)."""
        self._zlib = zlib.decompressobj(-15)
        self._message_bytes = 0
        self._window_lost = False

    def _inflate(self, data: bytes) -> bytes:
        if self._window_lost:
            raise InflateError("compression window lost when the connection was carried over")
        self._used = True
        inflate = self._zlib
        try:
            out = inflate.decompress(data, MAX_PIECE)  # a message's whole output, mostly
            self._message_bytes += len(out)
            if self._message_bytes > MAX_MESSAGE:
                raise InflateError(f"message inflates beyond {MAX_MESSAGE} bytes")
            if not inflate.unconsumed_tail:
                return out
            pieces = [out]
            data = inflate.unconsumed_tail
            while data:
                piece = inflate.decompress(data, MAX_PIECE)
                self._message_bytes += len(piece)
                if self._message_bytes > MAX_MESSAGE:
                    raise InflateError(f"message inflates beyond {MAX_MESSAGE} bytes")
                pieces.append(piece)
                data = inflate.unconsumed_tail
        except zlib.error as error:
            raise InflateError(str(error)) from None
        return b"".join(pieces)
