"""Fuzz the sans-IO STOMP decoder: any bytes, any chunking, gaps, every option.

Input layout: byte 0 picks the options (version, lenient, resync, small limits, gaps, a long
stream made by repeating the input), byte 1 seeds the chunk sizes, the rest is the stream.

Checked for every input: nothing raises; the bytes buffered inside the decoder never exceed
what its limits allow (so memory stays bounded however long the stream); events are known
kinds at offsets inside the stream, frames and heart-beats in order and not overlapping; a
non-empty stream yields at least one event; feeding it whole, in chunks, or with the compiled
hot paths or without them, or with the pure-Python twin of the compiled decoder
(`fuzz.twins`), gives the same events.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator

from hypothesis import strategies as st

from fuzz import harness, twins
from fuzz.seeds import EDGE_STREAMS, PASSCODE, stomp_streams
from pipeline.stomp import NEED_DATA, Decoder, Event, Frame, HeartBeat, Limits, Violation, speedups
from pipeline.stomp.commands import LONGEST_COMMAND
from pipeline.stomp.violations import ALL_KINDS

VERSIONS = ("1.0", "1.1", "1.2")
SMALL_LIMITS = Limits(max_command=12, max_header_line=40, max_headers=4, max_body=64)
LONG_STREAM = 16 * 1024  # a repeated input is repeated until it is about this long: over ten
# times the bound of the small limits (the only limits a stream this long can reach)
MAX_LEN = 1 << 14
(PURE,) = twins.pure("pipeline.stomp")  # the decoder's pure-Python twin
LIMIT_FIELDS = ("max_command", "max_header_line", "max_headers", "max_body")
_RESYNC_SLACK = 1024 + LONGEST_COMMAND + 2 + 16 + 2  # EOL run + command window (resync.py)


def buffered_bound(limits: Limits) -> int:
    """The most bytes a decoder may hold: a whole head at its limits, a body at its limit, and
    what resync keeps while it cannot yet tell whether a frame starts."""
    head = limits.max_command + 2 + (limits.max_headers + 1) * (limits.max_header_line + 2) + 2
    return head + limits.max_body + 1 + _RESYNC_SLACK


class Options:
    __slots__ = ("version", "lenient", "resync", "limits", "gaps", "repeat", "chunk_seed")

    def __init__(self, data: bytes) -> None:
        flags = data[0] if data else 0
        self.version = VERSIONS[flags % 3]
        self.lenient = bool(flags & 4)
        self.resync = bool(flags & 8)
        self.limits = SMALL_LIMITS if flags & 16 else Limits()
        self.gaps = bool(flags & 32)
        self.repeat = bool(flags & 64)
        self.chunk_seed = data[1] if len(data) > 1 else 0

    def decoder(self, decoder_type: type = Decoder) -> Decoder:
        limits = self.limits
        if decoder_type is not Decoder:  # the twin's Limits
            limits = PURE.Limits(**{name: getattr(limits, name) for name in LIMIT_FIELDS})
        decoder: Decoder = decoder_type(
            self.version, limits=limits, lenient=self.lenient, resync=self.resync
        )
        return decoder


def pieces(stream: bytes, options: Options) -> Iterator[tuple[bytes, int]]:
    """(chunk, gap after it) pairs covering the stream; a repeated input is repeated until it
    is about LONG_STREAM bytes, and cut in larger chunks."""
    rng = random.Random(options.chunk_seed)
    sizes = (3, 64, 4096)
    if options.repeat and stream:
        stream *= -(-LONG_STREAM // len(stream))
        sizes = (64, 4096, 16384)
    at = 0
    while at < len(stream):
        size = rng.randint(1, rng.choice(sizes))
        gap = rng.randint(1, 50) if options.gaps and rng.random() < 0.1 else 0
        yield stream[at : at + size], gap
        at += size


def decode_checked(stream: bytes, options: Options) -> tuple[list[Event], int]:
    """Events of the chunked stream, checking the buffer bound after every step; also returns
    the stream length including gaps."""
    decoder = options.decoder()
    bound = buffered_bound(options.limits)
    events: list[Event] = []
    length = 0
    for chunk, gap in pieces(stream, options):
        decoder.feed(chunk)
        length += len(chunk)
        events.extend(_pull(decoder))
        held = len(decoder._buf) - decoder._pos  # noqa: SLF001 - the bound is the point
        assert held <= bound, f"decoder holds {held} bytes, bound {bound}"
        if gap:
            decoder.feed_gap(gap)
            length += gap
            events.extend(_pull(decoder))
    decoder.feed_eof()
    events.extend(_pull(decoder))
    decoder.feed(b"after eof")
    late = _pull(decoder)
    assert [type(e) for e in late] == [Violation], late
    assert isinstance(late[0], Violation) and late[0].kind == "data_after_eof", late
    return events, length


def decode_whole(stream: bytes, options: Options, decoder_type: type | None = None) -> list[Event]:
    decoder = options.decoder(decoder_type or Decoder)
    need_data = NEED_DATA if decoder_type in (None, Decoder) else PURE.NEED_DATA
    decoder.feed(stream)
    events = _pull(decoder, need_data)
    decoder.feed_eof()
    return events + _pull(decoder, need_data)


def _pull(decoder: Decoder, need_data: object = NEED_DATA) -> list[Event]:
    events: list[Event] = []
    while (event := decoder.next_event()) is not need_data:
        events.append(event)  # type: ignore[arg-type]
    return events


def check_events(events: list[Event], length: int) -> None:
    cursor = 0
    for event in events:
        violations: tuple[Violation, ...] = ()
        if type(event) is HeartBeat:
            assert event.offset >= cursor and event.length in (1, 2), event
            cursor = event.offset + event.length
        elif type(event) is Frame:
            assert cursor <= event.start < event.end <= length, (cursor, event.start, event.end)
            cursor = event.end
            assert isinstance(event.command, str)
            assert all(isinstance(n, str) and isinstance(v, str) for n, v in event.header_list)
            assert set(event.headers) == {name for name, _ in event.header_list}
            violations = event.violations
            if event.content_length is not None:
                assert len(event.body) == event.content_length
            passcodes = [
                (name, value)
                for name, value in event.header_list
                if name.lower() == "passcode" and value != "***"
            ]
            if passcodes:
                shown = repr(event)
                for name, value in passcodes:
                    assert f"({name!r}, {value!r})" not in shown, "repr shows a passcode"
        else:
            assert type(event) is Violation, event
            violations = (event,)
        for violation in violations:
            assert violation.kind in ALL_KINDS, violation
            assert 0 <= violation.offset <= length, (violation, length)


def check(data: bytes) -> None:
    options = Options(data)
    stream = data[2:]
    events, length = decode_checked(stream, options)
    check_events(events, length)
    if stream:
        assert events, "a non-empty stream yielded no event"
    if options.repeat:
        return
    whole = decode_whole(stream, options)
    if not options.gaps:
        assert whole == events, "chunking changed the events"
    compiled = speedups.compiled
    if compiled is not None:
        speedups.compiled = None
        try:
            without_c = decode_whole(stream, options)
        finally:
            speedups.compiled = compiled
        assert without_c == whole, "the decoder with and without its C hot paths disagree"
    with twins.running_pure():
        python = decode_whole(stream, options, PURE.Decoder)
    assert list(map(plain, python)) == list(map(plain, whole)), (
        "the compiled and the pure-Python decoder disagree"
    )


def plain(event: object) -> tuple[object, ...]:
    """An event as plain values: the twins' event classes are not each other's."""
    if type(event).__name__ == "Frame":
        frame: Frame = event  # type: ignore[assignment]
        return (
            "frame",
            frame.command,
            frame.header_list,
            frame.body,
            frame.start,
            frame.end,
            frame.content_length,
            [plain(violation) for violation in frame.violations],
        )
    if type(event).__name__ == "HeartBeat":
        beat: HeartBeat = event  # type: ignore[assignment]
        return ("heart-beat", beat.offset, beat.length)
    violation: Violation = event  # type: ignore[assignment]
    return ("violation", violation.kind, violation.offset, violation.detail)


def seeds() -> list[bytes]:
    out = []
    for number, stream in enumerate((*stomp_streams(), *EDGE_STREAMS)):
        for flags in (number % 3, 16 | number % 3, 4 | 8 | 32):
            out.append(bytes([flags, number & 0xFF]) + stream[: MAX_LEN - 2])
    return out


FRAME_PARTS = st.sampled_from(
    [
        b"SEND\n",
        b"MESSAGE\n",
        b"CONNECT\n",
        b"CONNECTED\n",
        b"ACK\n",
        b"send\n",
        b"FOO\n",
        b"destination:/q\n",
        b"content-length:3\n",
        b"content-length:9999999999\n",
        b"content-length:x\n",
        b"passcode:" + PASSCODE.encode() + b"\n",
        b"a\\cb:\\n\\t\n",
        b"\xff\xfe:v\n",
        b":\n",
        b"no-colon\n",
        b"\n",
        b"\r\n",
        b"\x00",
        b"\x00\n",
        b"abc",
        b"x" * 50 + b"\n",
    ]
)


def strategy() -> st.SearchStrategy[bytes]:
    structured = st.lists(FRAME_PARTS, max_size=40).map(b"".join)
    stream = st.one_of(
        harness.mutated([s[2:] for s in seeds()]), structured, st.binary(max_size=512)
    )
    return st.tuples(st.binary(min_size=2, max_size=2), stream).map(b"".join)


if __name__ == "__main__":
    sys.exit(harness.main(sys.modules[__name__]))
