"""Fuzz the WebSocket de-framer and transport (pipeline/websocket): any bytes, any chunking.

Input layout: byte 0 picks the options (which side sent the bytes, permessage-deflate with or
without context takeover, gaps, whole connection through the Transport after a real upgrade),
byte 1 seeds the chunk sizes, the rest is one direction's bytes after the upgrade.

Checked for every input: nothing raises; the de-framer holds at most a frame header and a
bounded control payload; events are known kinds with known violation kinds; STOMP bytes and
gaps tile the STOMP stream from offset 0 and name TCP offsets inside what was fed; feeding the
bytes whole or in chunks gives the same control frames and violations, and the same STOMP bytes
unless a compressed message fails to inflate (streaming inflation hands on the part before the
bad data, so that part depends on the chunking); through the Transport, the same bytes after a
real upgrade give the same STOMP stream.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from pathlib import Path

from hypothesis import strategies as st

from fuzz import harness
from pipeline.net import Direction
from pipeline.websocket import violations
from pipeline.websocket.deframer import MAX_CONTROL_KEPT, Deframer
from pipeline.websocket.events import Control, Event, StompData, StompGap, Violation
from pipeline.websocket.handshake import Deflate
from pipeline.websocket.transport import Transport

MAX_LEN = 1 << 14
ALL_KINDS = frozenset(
    value for name, value in vars(violations).items() if name.isupper() and isinstance(value, str)
)
DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "websocket"
REQUEST = (
    b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
    b"Sec-WebSocket-Protocol: v12.stomp\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n"
)


def response(deflate: Deflate | None) -> bytes:
    extension = ""
    if deflate is not None:
        extension = "Sec-WebSocket-Extensions: permessage-deflate"
        if deflate.client_no_context_takeover:
            extension += "; client_no_context_takeover; server_no_context_takeover"
        extension += "\r\n"
    return (
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Protocol: v12.stomp\r\n{extension}\r\n"
    ).encode()


class Options:
    __slots__ = ("from_client", "deflate", "gaps", "transport", "chunk_seed")

    def __init__(self, data: bytes) -> None:
        flags = data[0] if data else 0
        self.from_client = bool(flags & 1)
        self.deflate = Deflate(bool(flags & 4), bool(flags & 4)) if flags & 2 else None
        self.gaps = bool(flags & 8)
        self.transport = bool(flags & 16)
        self.chunk_seed = data[1] if len(data) > 1 else 0

    @property
    def direction(self) -> Direction:
        return Direction.of(self.from_client)


def pieces(stream: bytes, options: Options) -> Iterator[tuple[bytes, int]]:
    rng = random.Random(options.chunk_seed)
    at = 0
    while at < len(stream):
        size = rng.randint(1, rng.choice((1, 7, 64, 4096)))
        gap = rng.randint(1, 50) if options.gaps and rng.random() < 0.1 else 0
        yield stream[at : at + size], gap
        at += size


def deframe(stream: bytes, options: Options, *, chunked: bool) -> tuple[list[Event], int]:
    deframer = Deframer(
        options.direction, from_client=options.from_client, deflate=options.deflate, tcp_offset=0
    )
    events: list[Event] = []
    fed = 0
    parts = pieces(stream, options) if chunked else iter([(stream, 0)])
    for chunk, gap in parts:
        events += deframer.feed(chunk, fed)
        fed += len(chunk)
        assert len(deframer._head) < 14  # noqa: SLF001 - the bound is the point
        frame = deframer._frame  # noqa: SLF001
        assert frame is None or frame.control is None or len(frame.control) <= MAX_CONTROL_KEPT
        if gap:
            events += deframer.feed_gap(gap, fed)
            fed += gap
    events += deframer.feed_eof(fed)
    return events, fed


def check_events(events: list[Event], fed: int) -> None:
    stomp_at = 0
    for event in events:
        if type(event) is StompData:
            assert event.stomp_offset == stomp_at, (event.stomp_offset, stomp_at)
            assert event.data
            stomp_at += len(event.data)
            assert 0 <= event.tcp_offset < fed
        elif type(event) is StompGap:
            assert event.stomp_offset == stomp_at and event.size > 0
            stomp_at += event.size
        elif type(event) is Control:
            assert event.kind in ("ping", "pong", "close")
            assert 0 <= event.tcp_offset < fed
        else:
            assert type(event) is Violation, event
            assert event.kind in ALL_KINDS, event
            assert event.tcp_offset is None or 0 <= event.tcp_offset <= fed


def summary(events: list[Event]) -> tuple[bytes, list[tuple[object, ...]]]:
    stomp = b"".join(e.data for e in events if type(e) is StompData)
    others: list[tuple[object, ...]] = [
        (e.kind, e.tcp_offset, getattr(e, "payload", None))  # type: ignore[union-attr]
        for e in events
        if type(e) in (Control, Violation)
    ]
    return stomp, others


def through_transport(stream: bytes, options: Options) -> bytes:
    transport = Transport()
    events = transport.receive(Direction.C2S, 0, 0, REQUEST)
    events += transport.receive(Direction.S2C, 1, 0, response(options.deflate))
    direction = options.direction
    offset = len(REQUEST) if options.from_client else len(response(options.deflate))
    for chunk, _gap in pieces(stream, options):
        events += transport.receive(direction, 2, offset, chunk)
        offset += len(chunk)
    events += transport.receive_eof(direction, 3) + transport.finish(3)
    return b"".join(e.data for e in events if type(e) is StompData)


def _but_utf8(others: list[tuple[object, ...]]) -> list[tuple[object, ...]]:
    return [other for other in others if other[0] != violations.INVALID_UTF8]


def check(data: bytes) -> None:
    options = Options(data)
    stream = data[2:]
    events, fed = deframe(stream, options, chunked=True)
    check_events(events, fed)
    if options.gaps:
        return
    whole, _ = deframe(stream, options, chunked=False)
    (chunked_stomp, chunked_others), (whole_stomp, whole_others) = summary(events), summary(whole)
    if any(kind == violations.INFLATE_FAILED for kind, *_ in whole_others):
        # inflating in pieces hands on what came before the bad data, and checks that part as
        # UTF-8: chunking shows in the STOMP bytes and in invalid UTF-8 found there
        assert _but_utf8(chunked_others) == _but_utf8(whole_others), "chunking changed events"
        return
    assert chunked_others == whole_others, "chunking changed the control frames or violations"
    assert chunked_stomp == whole_stomp, "chunking changed the STOMP bytes"
    if options.transport:
        assert through_transport(stream, options) == summary(whole)[0], "transport differs"


def _capture_streams() -> list[tuple[bool, bytes]]:
    """Each direction of each real WebSocket connection, after its HTTP head."""
    from pipeline.reassembly import Data, Segment
    from pipeline.websocket.handshake import head_end
    from tests.support.local_reassembly import LocalReassembly

    streams: dict[tuple[str, bool], bytearray] = {}
    for path in sorted(DATA.glob("*.pcap")):
        for event in LocalReassembly([str(path)]):
            if type(event) is Segment and type(event.event) is Data:
                key = (event.connection_id, event.from_client)
                streams.setdefault(key, bytearray()).extend(event.event.data)
    out = []
    for (_, from_client), stream in streams.items():
        end = head_end(stream)
        if end > 0:
            out.append((from_client, bytes(stream[end:])))
    return out


def seeds() -> list[bytes]:
    out = []
    for number, (from_client, stream) in enumerate(_capture_streams()):
        deflated = stream[:1] and stream[0] & 0x40  # a compressed first message
        for flags in (0, 16, 8):
            flags |= int(from_client) | (2 if deflated else 0)
            out.append(bytes([flags, number & 0xFF]) + stream[: MAX_LEN - 2])
    return out


def _frame(draw: st.DrawFn) -> bytes:
    opcode = draw(st.sampled_from([0, 1, 2, 3, 8, 9, 10, 11]))
    fin = draw(st.booleans())
    rsv = draw(st.sampled_from([0, 0, 0, 0x40, 0x20, 0x10]))
    payload = draw(
        st.one_of(
            st.sampled_from([b"", b"\n", b"CONNECT\n\n\x00", b"\x03\xe8bye", b"\xff\xfe"]),
            st.binary(max_size=300),
        )
    )
    size = len(payload)
    form = draw(st.sampled_from([None, 126, 127]))
    form = form if form is not None else (size if size < 126 else 126 if size < 65536 else 127)
    mask = draw(st.one_of(st.none(), st.binary(min_size=4, max_size=4)))
    head = bytes([(0x80 if fin else 0) | rsv | opcode, (0x80 if mask else 0) | form])
    if form == 126:
        head += size.to_bytes(2, "big")
    elif form == 127:
        head += size.to_bytes(8, "big")
    if mask:
        head += mask
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    if draw(st.integers(0, 20)) == 0:
        payload = payload[: len(payload) // 2]  # a truncated frame
    return head + payload


def strategy() -> st.SearchStrategy[bytes]:
    structured = st.lists(st.composite(_frame)(), max_size=12).map(b"".join)
    stream = st.one_of(
        harness.mutated([s[2:] for s in seeds()]), structured, st.binary(max_size=512)
    )
    return st.tuples(st.binary(min_size=2, max_size=2), stream).map(b"".join)


if __name__ == "__main__":
    sys.exit(harness.main(sys.modules[__name__]))
