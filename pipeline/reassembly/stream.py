"""Sans-IO reassembly of one direction of a TCP connection into stream-ordered events.

Sequence numbers are unwrapped into 64-bit absolute positions; `offset` values in events are
stream offsets (0 = first byte after the SYN, or the first data byte seen when the SYN was not
captured).

Rules:
- Data events come out in stream order only, one per captured piece, stamped with the capture
  time of the segment that carried it.
- First wins: bytes already received (delivered, or buffered out of order) are kept; a later
  segment re-sending them with different bytes yields a Conflict over the differing span.
  Delivered bytes are compared while they are still in the `history_bytes` tail.
- Keep-alives (0 or 1 byte re-sending the highest byte seen so far) are ignored.  Linux
  zero-window probes look the same; BSD-style probes carry the genuine next byte, so
  first-wins makes them harmless.
- A payload cut by the snapshot length (wire_len > len(payload)) leaves a known hole, reported
  as a Gap as soon as the stream reaches it (unless other captured bytes fill it first).
- Out-of-order bytes wait in a buffer of at most max_pending_bytes; beyond that the earliest
  hole is declared a Gap and delivery goes on.  flush() declares all remaining holes, and the
  hole up to a captured FIN.
- A FIN that arrives while bytes before it are missing declares those holes at once: the peer
  had them (it accepted the FIN), so only the capture lost them, and the bytes between the holes
  and the FIN are delivered before the caller acts on the close.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from dataclasses import dataclass

from pipeline.net import FIN, RST, SYN

SEQ_MOD = 1 << 32
HALF = 1 << 31


@dataclass(slots=True, frozen=True)
class Data:
    offset: int
    ts_ns: int
    data: bytes


@dataclass(slots=True, frozen=True)
class Gap:
    """Bytes [offset, offset + size) were never captured.

    ts_ns is the capture time of the first segment after the hole (for a hole at the end of
    the stream, of the last segment seen).
    """

    offset: int
    size: int
    ts_ns: int


@dataclass(slots=True, frozen=True)
class Conflict:
    """A retransmission re-sent [offset, offset + size) with different bytes; the first kept."""

    offset: int
    size: int
    ts_ns: int


StreamEvent = Data | Gap | Conflict


def continues(nxt: int, high: int, seq: int, size: int) -> bool:
    """Whether a segment of ``size`` (> 0) bytes at ``seq``, all captured, without SYN, FIN or
    RST, is exactly the next of a stream at `StreamReassembler.in_order_position` (``nxt``,
    ``high``), so that `StreamReassembler.add_run` may take it. A keep-alive probe (one byte
    re-sending the highest seen) is not."""
    return seq == nxt % SEQ_MOD and not (size <= 1 and nxt == high - 1)


def _kept_after(kept: int, size: int, limit: int) -> int:
    """How many delivered bytes the tail kept for comparisons holds after ``size`` more: it
    grows to twice ``limit``, then is cut back to ``limit`` (in batches, not on every
    segment); a segment of ``limit`` bytes or more leaves only its own last ``limit``."""
    if size >= limit:
        return limit
    kept += size
    return limit if kept > 2 * limit else kept


class DeliveredTail:
    """The last bytes a direction delivered, kept to compare retransmissions with: the
    delivered ``bytes`` themselves, referenced, not copied. Copying them into one buffer per
    direction was 6% of the flow pass on 100 MB: most of it the first writes to each
    direction's fresh buffer of up to twice `StreamReassembler.history_bytes`, whose pages
    the kernel must supply. Short pieces (under `SMALL_PIECE` bytes) are copied together into
    buffers of their own (none longer than the tail), so a stream of tiny segments holds few
    objects. What it holds is the bytes kept and the start of the first piece: at most four
    times ``history_bytes``. Pickled as the bytes it keeps (`StreamReassembler.__getstate__`).
    """

    __slots__ = ("pieces", "skip", "used")

    SMALL_PIECE = 1024
    JOINED_PIECES = 16 * 1024  # size of the buffers short pieces are copied into

    def __init__(self, data: bytes | bytearray = b"") -> None:
        self.pieces: list[bytes | bytearray] = [bytes(data)] if data else []
        self.skip = 0  # bytes of the first piece before the tail
        self.used = len(data)  # bytes kept

    def __len__(self) -> int:
        return self.used

    def __bytes__(self) -> bytes:
        return b"".join(self.pieces)[self.skip : self.skip + self.used]

    @property
    def held(self) -> int:
        """Bytes of the pieces referenced (the tail and what precedes it in its first piece)."""
        return sum(len(piece) for piece in self.pieces)

    def keep(self, data: bytes | bytearray | memoryview, kept: int) -> None:
        """Becomes the last ``kept`` bytes of itself followed by ``data``."""
        size = len(data)
        if kept <= size:
            if type(data) is bytes and size <= 2 * kept:
                self.pieces, self.skip = [data], size - kept
            else:  # a piece mostly cut, or not immutable: only what is kept, copied
                self.pieces, self.skip = [bytes(memoryview(data)[size - kept :])], 0
            self.used = kept
            return
        pieces = self.pieces
        if size < self.SMALL_PIECE:
            last = pieces[-1] if pieces else None
            if type(last) is bytearray and len(last) + size <= min(kept, self.JOINED_PIECES):
                last += data
            else:
                pieces.append(bytearray(data))
        else:
            pieces.append(data if type(data) is bytes else bytes(data))
        skip = self.skip + self.used + size - kept  # the bytes before the tail, from the first
        self.used = kept
        if skip:
            dropped = 0
            while skip >= len(pieces[dropped]):
                skip -= len(pieces[dropped])
                dropped += 1
            if dropped:
                del pieces[:dropped]
        self.skip = skip

    def between(self, lo: int, hi: int) -> bytes:
        """Bytes [lo, hi) of the tail."""
        assert 0 <= lo <= hi <= self.used
        parts = []
        start = -self.skip  # of the piece, in tail positions
        for piece in self.pieces:
            end = start + len(piece)
            if end > lo and start < hi:
                parts.append(piece[max(lo - start, 0) : min(hi, end) - start])
            start = end
        return b"".join(parts)

    def clear(self) -> None:
        self.pieces, self.skip, self.used = [], 0, 0


@dataclass(slots=True)
class StreamStats:
    delivered_bytes: int = 0
    duplicate_bytes: int = 0  # re-sent bytes dropped (identical or no longer verifiable)
    conflict_bytes: int = 0
    gap_bytes: int = 0
    probes_ignored: int = 0  # keep-alives and zero-window probes
    early_bytes: int = 0  # bytes before the stream start (capture began mid-stream)
    rst_payload_bytes: int = 0  # payload carried by RST segments (diagnostic text, not stream)


class StreamReassembler:
    """Reassembles one direction; feed every segment of that direction in capture order."""

    __slots__ = (
        "_origin",
        "_next",
        "_starts",
        "_segments",
        "_pending_bytes",
        "_holes",
        "_history",
        "_history_start",
        "_fin",
        "_high",
        "_last_ts",
        "max_pending_bytes",
        "history_bytes",
        "stats",
    )

    def __init__(
        self,
        isn: int | None = None,
        *,
        max_pending_bytes: int = 8 * 1024 * 1024,
        history_bytes: int = 64 * 1024,
    ) -> None:
        self._origin: int | None = None if isn is None else isn + 1
        self._next: int = 0 if isn is None else isn + 1
        self._starts: list[int] = []  # absolute starts of buffered out-of-order pieces
        self._segments: list[tuple[int, bytes, int]] = []  # (start, bytes, ts_ns), disjoint
        self._pending_bytes = 0
        # [start, end) known missing (snaplen cuts), a heap: a lost segment ahead of many cut
        # ones leaves a hole per packet waiting, so keeping a sorted list would be quadratic
        self._holes: list[tuple[int, int]] = []
        self._history = DeliveredTail()  # last delivered bytes, ending at _next
        self._history_start = self._next
        self._fin: int | None = None
        self._high = self._next  # end of the highest byte seen
        self._last_ts = 0
        self.max_pending_bytes = max_pending_bytes
        self.history_bytes = history_bytes
        self.stats = StreamStats()

    def __getstate__(self) -> tuple[None, dict[str, object]]:
        """As pickle saves slots, with the tail as the bytearray of what it keeps: the same
        state as before `DeliveredTail` (carried state stays at its version)."""
        state: dict[str, object] = {name: getattr(self, name) for name in self.__slots__}
        state["_history"] = bytearray(bytes(self._history))
        return None, state

    def __setstate__(self, state: tuple[None, dict[str, object]]) -> None:
        values = dict(state[1])
        self._history = DeliveredTail(values.pop("_history"))  # type: ignore[arg-type]
        for name, value in values.items():
            setattr(self, name, value)

    @property
    def started(self) -> bool:
        return self._origin is not None

    @property
    def next_seq(self) -> int | None:
        """The 32-bit sequence number of the next byte expected (None before the start)."""
        return None if self._origin is None else self._next % SEQ_MOD

    @property
    def offset(self) -> int:
        """Stream offset of the next byte expected: bytes delivered plus gaps so far."""
        return 0 if self._origin is None else self._next - self._origin

    @property
    def pending_bytes(self) -> int:
        return self._pending_bytes

    def add(
        self,
        seq: int,
        payload: bytes,
        ts_ns: int,
        *,
        flags: int = 0,
        wire_len: int | None = None,
    ) -> list[StreamEvent]:
        """Take one segment of this direction; return the events it makes available."""
        if flags & RST:
            self.stats.rst_payload_bytes += len(payload)
            return []
        if flags & SYN:
            if self._origin is None:
                self._start(seq + 1)
            seq += 1
        size = len(payload)
        missing = wire_len - size if wire_len is not None and wire_len > size else 0
        if self._origin is None:
            if size + missing == 0:
                return []
            self._start(seq)
        origin = self._origin
        assert origin is not None  # started just above at the latest
        start = self._unwrap(seq)
        self._last_ts = ts_ns
        if flags & FIN and self._fin is None:
            self._fin = start + size + missing
        if size + missing == 0:
            events: list[StreamEvent] = []
            if flags & FIN and self._next < self._fin:  # type: ignore[operator]
                self._close_holes(events)
            return events
        if size <= 1 and missing == 0 and start == self._high - 1:
            # Keep-alive / probe: re-sends the last byte seen (with any content), or nothing.
            self.stats.probes_ignored += 1
            return []
        if start + size + missing > self._high:
            self._high = start + size + missing
        events = []
        if missing:
            self._add_hole(start + size, start + size + missing)
        if start < origin:
            early = min(size, origin - start)
            self.stats.early_bytes += early
            payload = payload[early:]
            start += early
        if start < self._next and payload:
            old = min(len(payload), self._next - start)
            self._compare_history(start, payload[:old], ts_ns, events)
            payload = payload[old:]
            start += old
        if payload:
            if start == self._next and not self._starts:
                self._deliver(start, payload, ts_ns, events)
            else:
                self._buffer(start, payload, ts_ns, events)
        self._drain(events)
        while self._pending_bytes > self.max_pending_bytes:
            self._skip_first_hole(events)
            self._drain(events)
        if flags & FIN and self._next < self._fin:  # type: ignore[operator]
            self._close_holes(events)
        return events

    def in_order_position(self) -> tuple[int, int] | None:
        """(next byte expected, highest byte seen + 1), both unwrapped, when `add_run` may take
        segments that continue from the former (see `continues`); None when ``add`` must take
        them: nothing is buffered, missing or closed in this direction."""
        if self._origin is None or self._starts or self._holes or self._fin is not None:
            return None
        return self._next, self._high

    def add_run(self, data: bytes, sizes: list[int], ts_ns: int) -> int:
        """``add`` of segments of ``sizes`` bytes, joined in ``data``, the last captured at
        ``ts_ns``, each of which `continues` the one before from `in_order_position`: the same
        state after as ``add`` of each, and the stream offset of their first byte (``add``
        would have made one Data event per segment, in order)."""
        start = self._next
        origin = self._origin
        assert origin is not None and not (self._starts or self._holes)
        self._last_ts = ts_ns
        end = start + len(data)
        if end > self._high:
            self._high = end
        self._history_after(data, sizes)
        self._next = end
        self.stats.delivered_bytes += len(data)
        return start - origin

    def touch(self, ts_ns: int) -> None:
        """A segment without payload or flags that matter (a bare ACK): ``add`` without events."""
        if self._origin is not None:
            self._last_ts = ts_ns

    def flush(self) -> list[StreamEvent]:
        """End of input: declare every remaining hole a Gap and deliver what follows it."""
        events: list[StreamEvent] = []
        self._drain(events)
        while self._starts:
            self._skip_first_hole(events)
            self._drain(events)
        # Nothing captured after these: the stream end is known only from a FIN or a cut.
        end = max([self._fin or 0] + [hole_end for _start, hole_end in self._holes])
        if self._origin is not None and end > self._next:
            self._gap(end - self._next, self._last_ts, events)
        self._holes.clear()
        return events

    # --- internals ------------------------------------------------------------------------

    def _start(self, origin: int) -> None:
        self._origin = self._next = self._history_start = self._high = origin

    def _unwrap(self, seq: int) -> int:
        delta = (seq - self._next) % SEQ_MOD
        if delta >= HALF:
            delta -= SEQ_MOD
        return self._next + delta

    def _deliver(self, start: int, data: bytes, ts_ns: int, events: list[StreamEvent]) -> None:
        events.append(self._take(start, data, ts_ns))

    def _take(self, start: int, data: bytes, ts_ns: int) -> Data:
        """``data`` at ``start`` (= the next byte expected) is delivered: its Data event."""
        origin = self._origin
        assert origin is not None  # only called once started
        event = Data(start - origin, ts_ns, data)
        self._next = start + len(data)
        self.stats.delivered_bytes += len(data)
        self._keep_history(data, self._next)
        return event

    def _keep_history(self, data: bytes | memoryview, end: int) -> None:
        """Delivered ``data``, ending at ``end``, joins the tail kept for comparisons."""
        kept = _kept_after(len(self._history), len(data), self.history_bytes)
        self._keep_tail(data, kept, end)

    def _history_after(self, data: bytes, sizes: list[int]) -> None:
        """The tail kept after delivering segments of ``sizes`` one by one (as `_take` would):
        how much of it is kept depends on where the segments were cut. The tail is always the
        bytes delivered last, so only its length is followed segment by segment."""
        limit = self.history_bytes
        kept = len(self._history)
        if kept + len(data) <= 2 * limit and max(sizes) < limit:
            kept += len(data)  # the usual run: no segment trims the tail
        else:
            for size in sizes:
                kept = _kept_after(kept, size, limit)
        self._keep_tail(data, kept, self._next + len(data))

    def _keep_tail(self, data: bytes | memoryview, kept: int, end: int) -> None:
        """The tail becomes the last ``kept`` bytes of itself followed by ``data``, which ends
        at stream position ``end``."""
        self._history.keep(data, kept)
        self._history_start = end - kept

    def _gap(self, size: int, ts_ns: int, events: list[StreamEvent]) -> None:
        origin = self._origin
        assert origin is not None  # only called once started
        events.append(Gap(self._next - origin, size, ts_ns))
        self.stats.gap_bytes += size
        self._next += size
        self._history.clear()
        self._history_start = self._next

    def _compare_history(
        self, start: int, data: bytes, ts_ns: int, events: list[StreamEvent]
    ) -> None:
        """Bytes [start, start + len(data)) were delivered before: dup or conflict?"""
        lo = max(start, self._history_start)
        hi = start + len(data)
        if lo < hi:
            kept = self._history.between(lo - self._history_start, hi - self._history_start)
            self._compare(lo, kept, data[lo - start :], ts_ns, events)
        self.stats.duplicate_bytes += max(0, lo - start)

    def _compare(
        self,
        start: int,
        kept: bytes | bytearray,
        resent: bytes,
        ts_ns: int,
        events: list[StreamEvent],
    ) -> None:
        if kept == resent:
            self.stats.duplicate_bytes += len(resent)
            return
        first = next(i for i in range(len(kept)) if kept[i] != resent[i])
        last = next(i for i in range(len(kept) - 1, -1, -1) if kept[i] != resent[i])
        size = last - first + 1
        origin = self._origin
        assert origin is not None  # only called once started
        events.append(Conflict(start + first - origin, size, ts_ns))
        self.stats.conflict_bytes += size
        self.stats.duplicate_bytes += len(resent) - size

    def _buffer(self, start: int, data: bytes, ts_ns: int, events: list[StreamEvent]) -> None:
        """Keep the parts of [start, end) no buffered piece covers; compare the rest."""
        end = start + len(data)
        starts, segments = self._starts, self._segments
        i = bisect_right(starts, start) - 1
        if i < 0 or segments[i][0] + len(segments[i][1]) <= start:
            i += 1
        cursor = start
        fresh: list[tuple[int, bytes, int]] = []
        while cursor < end:
            if i < len(starts) and starts[i] <= cursor:
                seg_start, seg_data, _ = segments[i]
                stop = min(end, seg_start + len(seg_data))
                kept = seg_data[cursor - seg_start : stop - seg_start]
                self._compare(cursor, kept, data[cursor - start : stop - start], ts_ns, events)
                cursor = stop
                i += 1
            else:
                stop = min(end, starts[i]) if i < len(starts) else end
                fresh.append((cursor, data[cursor - start : stop - start], ts_ns))
                cursor = stop
        for piece in fresh:
            at = bisect_right(starts, piece[0])
            starts.insert(at, piece[0])
            segments.insert(at, piece)
            self._pending_bytes += len(piece[1])

    def _add_hole(self, start: int, end: int) -> None:
        if end > self._next:
            heapq.heappush(self._holes, (max(start, self._next), end))

    def _drain(self, events: list[StreamEvent]) -> None:
        """Deliver buffered pieces (and known holes) that the stream has reached."""
        starts, segments, holes = self._starts, self._segments, self._holes
        taken = 0  # consumed pieces are removed in one slice: popping the head is O(n) each
        while True:
            if taken < len(starts) and starts[taken] <= self._next:
                seg_start, data, ts_ns = segments[taken]
                taken += 1
                self._pending_bytes -= len(data)
                skip = self._next - seg_start
                if skip > 0:  # covered meanwhile by in-order data: verify, keep the rest
                    self._compare_history(seg_start, data[:skip], ts_ns, events)
                    data = data[skip:]
                if data:
                    self._deliver(self._next, data, ts_ns, events)
            elif holes and holes[0][0] <= self._next:
                hole_start, hole_end = heapq.heappop(holes)
                if hole_end > self._next:
                    following = taken < len(starts)
                    stop = min(hole_end, starts[taken]) if following else hole_end
                    ts_ns = segments[taken][2] if following else self._last_ts
                    self._gap(stop - self._next, ts_ns, events)
                    if stop < hole_end:
                        heapq.heappush(holes, (stop, hole_end))
            else:
                break
        if taken:
            del starts[:taken]
            del segments[:taken]

    def _close_holes(self, events: list[StreamEvent]) -> None:
        """The sender's FIN arrived with bytes before it still missing: the capture lost them
        (the peer had them to accept the FIN). Declare them now, so the bytes that follow are
        delivered before the close rather than after it."""
        while self._starts and self._starts[0] < self._fin:  # type: ignore[operator]
            self._skip_first_hole(events)
            self._drain(events)
        if self._next < self._fin:  # type: ignore[operator]
            self._gap(self._fin - self._next, self._last_ts, events)  # type: ignore[operator]

    def _skip_first_hole(self, events: list[StreamEvent]) -> None:
        first_start, _data, ts_ns = self._segments[0]
        if first_start > self._next:
            self._gap(first_start - self._next, ts_ns, events)
