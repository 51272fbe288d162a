"""What the WebSocket transport hands to its caller: small frozen events, one per thing seen.

Offsets: ``tcp_offset`` is a position in the direction's TCP byte stream (as reassembly numbers
it), ``stomp_offset`` a position in the STOMP byte stream that the data messages make when
concatenated in order.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from operator import itemgetter

from pipeline.net import Direction


@dataclass(slots=True, frozen=True)
class StompData:
    """STOMP bytes carried by data messages (the pieces one TCP chunk completed, joined).

    ``tcp_offset`` is where the WebSocket frame carrying the first byte starts, ``frames``
    lists (stomp_offset, tcp_offset) for each WebSocket frame the bytes came from (empty: one
    frame); ``ts_ns`` is the capture time of the TCP data that completed them.
    ``whole_message`` marks a WebSocket message of EOLs only, received whole: a heart-beat of
    its own, never joined with other bytes."""

    direction: Direction
    ts_ns: int
    stomp_offset: int
    tcp_offset: int
    data: bytes
    whole_message: bool
    frames: tuple[tuple[int, int], ...] = ()

    def tcp_offset_of(self, stomp_offset: int) -> int:
        """The TCP offset of the WebSocket frame that carried the byte at ``stomp_offset``."""
        frames = self.frames
        if not frames or stomp_offset < frames[0][0]:
            return self.tcp_offset
        return frames[bisect_right(frames, stomp_offset, key=itemgetter(0)) - 1][1]


@dataclass(slots=True, frozen=True)
class StompGap:
    """``size`` STOMP bytes lost to a capture gap inside an uncompressed data frame (the frame
    boundaries are still known, so the STOMP stream resumes after it)."""

    direction: Direction
    ts_ns: int
    stomp_offset: int
    size: int


@dataclass(slots=True, frozen=True)
class Control:
    """A ping, pong or close frame. ``rtt_ns``: for a pong answering an earlier ping of the
    other side (same payload), the time between the two; ``close_code`` / ``close_reason`` for
    a close (code None when the close had no payload)."""

    direction: Direction
    ts_ns: int
    tcp_offset: int
    kind: str  # "ping" | "pong" | "close"
    payload_length: int
    payload: bytes  # as read (at most the first 4096 bytes of an oversized control frame)
    close_code: int | None = None
    close_reason: str | None = None
    rtt_ns: int | None = None


@dataclass(slots=True, frozen=True)
class Violation:
    """A protocol violation or a problem with the input (kinds in ``violations``)."""

    direction: Direction | None
    ts_ns: int
    tcp_offset: int | None
    stomp_offset: int | None
    kind: str
    detail: str


@dataclass(slots=True, frozen=True)
class HandshakeSeen:
    """The HTTP upgrade of a WebSocket connection, once the response (or its absence) is known.

    ``status`` is None when the capture ended before the response. ``stomp`` says whether the
    data messages are decoded as STOMP (101 and a STOMP subprotocol, or none chosen).
    ``request_ns`` is the capture time of the request's first bytes."""

    ts_ns: int
    path: str | None
    host: str | None
    origin: str | None
    user_agent: str | None
    subprotocols_offered: str | None
    subprotocol: str | None
    extensions_offered: str | None
    extensions: str | None
    status: int | None
    stomp: bool
    request_ns: int | None = None


@dataclass(slots=True, frozen=True)
class NotWebSocket:
    """The client did not open with a WebSocket upgrade: the connection is plain STOMP over
    TCP and every byte, the ones held back while deciding included, follows as StompData with
    ``stomp_offset == tcp_offset``."""

    ts_ns: int


Event = StompData | StompGap | Control | Violation | HandshakeSeen | NotWebSocket
