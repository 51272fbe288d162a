"""One direction of a connection: its decoder, and which capture chunk holds which bytes.

Frames and heart-beats carry stream offsets only; the chunk list maps an offset back to the
capture time (and file position) of the packet that carried it. Chunks are dropped once no
pending frame or heart-beat can still refer to them.

Compiled from this source (`pipeline.compiled.SOURCE_MODULES`, ``streams.pxd``): a chunk is
made for every capture packet, and the model reads chunks and streams as C structs.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from datetime import date, datetime
from operator import itemgetter

from pipeline.compiled import set_slot_values, slot_values
from pipeline.session.clock import to_datetime
from pipeline.stomp import Decoder

_MAX_CHUNKS = 8192  # beyond this (a huge frame or endless garbage) middle chunks are forgotten
_KEEP_RECENT = 4096


class Stamp:
    """A capture time in the three forms rows need. Most stamps (one per packet) never reach a
    row: the datetime is made when first asked for."""

    __slots__ = ("ts_ns", "_ts")

    def __init__(self, ts_ns: int) -> None:
        self.ts_ns = ts_ns
        self._ts: datetime | None = None

    @property
    def ts(self) -> datetime:
        ts = self._ts
        if ts is None:
            ts = self._ts = to_datetime(self.ts_ns)
        return ts

    @property
    def date(self) -> date:
        return self.ts.date()

    def fields(self) -> tuple[object, ...]:
        """What the stamp is: compared, shown and pickled (not the datetime made from it)."""
        return (self.ts_ns,)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.fields() == other.fields()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"{type(self).__name__}{self.fields()!r}"

    def __reduce__(self) -> tuple[type[Stamp], tuple[object, ...]]:
        return type(self), self.fields()


class Chunk(Stamp):
    """Bytes [start, end) of one direction, delivered by one capture packet (or segment).

    Over WebSocket, ``tcp_start`` is the TCP offset of the frame that carried the bytes,
    ``tcp_frames`` the (start, TCP offset) of later frames, and ``beat_message`` says the bytes
    are a whole message of EOLs only: a heart-beat."""

    __slots__ = ("start", "end", "file", "file_offset", "tcp_start", "beat_message", "tcp_frames")

    def __init__(
        self,
        ts_ns: int,
        start: int,
        end: int,
        file: str | None,
        file_offset: int | None,
        tcp_start: int | None = None,
        beat_message: bool = False,
        tcp_frames: tuple[tuple[int, int], ...] = (),
    ) -> None:
        self.ts_ns = ts_ns
        self._ts = None
        self.start = start
        self.end = end
        self.file = file
        self.file_offset = file_offset
        self.tcp_start = tcp_start
        self.beat_message = beat_message
        self.tcp_frames = tcp_frames

    def tcp_offset_of(self, offset: int) -> int | None:
        """WebSocket: the TCP offset of the frame that carried the byte at stream ``offset``."""
        frames = self.tcp_frames
        if not frames or offset < frames[0][0]:
            return self.tcp_start
        return frames[bisect_right(frames, offset, key=itemgetter(0)) - 1][1]

    def fields(self) -> tuple[object, ...]:
        return (
            self.ts_ns,
            self.start,
            self.end,
            self.file,
            self.file_offset,
            self.tcp_start,
            self.beat_message,
            self.tcp_frames,
        )


def make_stamp(ts_ns: int) -> Stamp:
    return Stamp(ts_ns)


def make_chunk(start: int, end: int, ts_ns: int, source: tuple[str, int] | None) -> Chunk:
    """A chunk of a capture packet (``source``: its file and offset there, if known); made
    field by field, since one is made per packet."""
    chunk = Chunk.__new__(Chunk)
    chunk.ts_ns = ts_ns
    chunk._ts = None
    chunk.start = start
    chunk.end = end
    if source is None:
        chunk.file = chunk.file_offset = None
    else:
        chunk.file = source[0]
        chunk.file_offset = source[1]
    chunk.tcp_start = None
    chunk.beat_message = False
    chunk.tcp_frames = ()
    return chunk


class DirectionStream:
    __slots__ = (
        "direction",
        "decoder",
        "origin",
        "next_offset",
        "chunks",
        "keep_from",
        "trailer_end",
        "trailer_chunk",
        "expected_ms",
        "bytes",
        "frames",
        "heartbeats",
        "eof",
    )

    def __init__(self, direction: str) -> None:
        self.direction = direction
        self.decoder: Decoder | None = None
        self.origin = 0  # stream offset of the first byte seen
        self.next_offset = 0
        self.chunks: list[Chunk] = []
        self.keep_from = 0  # the earliest offset a future event may need the time of
        self.trailer_end = -1  # an EOL starting here may still trail the last frame
        self.trailer_chunk: Chunk | None = None
        self.expected_ms: int | None = None  # negotiated heart-beat interval, None = none
        self.bytes = 0
        self.frames = 0
        self.heartbeats = 0
        self.eof = False

    def start(self, offset: int, version: str, *, lenient: bool, resync: bool) -> Decoder:
        self.origin = self.next_offset = self.keep_from = offset
        self.decoder = Decoder(version, lenient=lenient, offset=offset, resync=resync)
        return self.decoder

    def __getstate__(self) -> tuple[None, dict[str, object]]:
        return slot_values(self)

    def __setstate__(self, state: tuple[None, dict[str, object]]) -> None:
        set_slot_values(self, state)

    # Methods as well as functions: the compiled model calls them in C.
    def make_chunk(self, start: int, end: int, ts_ns: int, source: tuple[str, int] | None) -> Chunk:
        return make_chunk(start, end, ts_ns, source)

    def make_stamp(self, ts_ns: int) -> Stamp:
        return make_stamp(ts_ns)

    def add_chunk(self, chunk: Chunk) -> None:
        self.chunks.append(chunk)
        self.next_offset = chunk.end
        self.bytes += chunk.end - chunk.start

    def add_packets(
        self,
        start: int,
        sizes: list[int],
        timestamps: list[int],
        sources: Sequence[tuple[str, int] | None],
    ) -> None:
        """A chunk for each of consecutive packets whose bytes begin at ``start``."""
        if not len(sizes) == len(timestamps) == len(sources):
            raise ValueError("sizes, timestamps and sources differ in length")
        chunks = self.chunks
        at = start
        for index in range(len(sizes)):
            size = sizes[index]
            chunks.append(make_chunk(at, at + size, timestamps[index], sources[index]))
            at += size
        if sizes:
            self.next_offset = at
            self.bytes += at - start

    def chunk_at(self, offset: int) -> Chunk | None:
        """The chunk holding ``offset`` (the last one before it when it fell in a gap)."""
        chunks = self.chunks
        for index in range(len(chunks) - 1, -1, -1):
            chunk = chunks[index]
            if chunk.start <= offset:
                return chunk
        return chunks[0] if chunks else None

    def is_trailing_eol(self, chunk: Chunk, offset: int) -> bool:
        """Whether the EOL at ``offset`` (in ``chunk``), which directly follows a frame's NUL or
        its trailing EOLs, is still part of that frame rather than a heart-beat.

        STOMP's grammar lets a NUL be followed by any number of EOLs, and a heart-beat exists
        only in a direction that negotiated one ("if heart-beats are expected every <n> ms ...
        the sender MUST send a single newline if it has no real frame to send"). So without
        heart-beating every such EOL trails the frame, however late flow control delivers it.
        With heart-beating, a sender beats only after being idle for about the interval (RabbitMQ
        at half of it): an EOL in the same chunk as the byte before it, or in a later chunk less
        than half the interval after it, trails the frame; a later one is a heart-beat. Over
        WebSocket, a message holding only EOLs is a heart-beat of its own.
        """
        if chunk.beat_message:
            return False  # over WebSocket a message of EOLs only is sent as a beat
        if chunk is self.trailer_chunk or self.expected_ms is None:
            return True
        previous = self.chunk_at(offset - 1)
        if previous is None or previous is chunk:
            return True
        return (chunk.ts_ns - previous.ts_ns) * 2 < self.expected_ms * 1_000_000

    def consumed(self, end: int) -> None:
        """Every byte before ``end`` has been turned into an event."""
        # The byte before `end` stays reachable: a heart-beat's gap is measured from it.
        self.keep_from = end - 1

    def prune(self) -> None:
        chunks = self.chunks
        keep_from = self.keep_from
        drop = 0
        last = len(chunks) - 1
        while drop < last:
            chunk = chunks[drop]
            if chunk.end > keep_from:
                break
            drop += 1
        if drop:
            del chunks[:drop]
        if len(chunks) > _MAX_CHUNKS:
            # Keep the first chunk (where the pending frame began) and the recent ones; a lookup
            # in the forgotten middle answers with the first chunk's time.
            del chunks[1 : len(chunks) - _KEEP_RECENT]
