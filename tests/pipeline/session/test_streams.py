from __future__ import annotations

from pipeline.session.streams import Chunk, DirectionStream, make_chunk, make_stamp

T0 = 1_700_000_000_000_000_000


def _stream(*bounds: int) -> DirectionStream:
    stream = DirectionStream("c2s")
    for n, (start, end) in enumerate(zip(bounds, bounds[1:], strict=False)):
        stream.add_chunk(make_chunk(start, end, T0 + n, ("f", n)))
    return stream


def _at(stream: DirectionStream, offset: int) -> Chunk:
    chunk = stream.chunk_at(offset)
    assert chunk is not None
    return chunk


def test_chunk_at_finds_the_chunk_holding_an_offset() -> None:
    stream = _stream(0, 10, 20, 35)
    assert [_at(stream, o).ts_ns - T0 for o in (0, 9, 10, 19, 20, 34)] == [0, 0, 1, 1, 2, 2]
    assert stream.bytes == 35 and stream.next_offset == 35


def test_chunk_at_answers_the_chunk_before_a_hole() -> None:
    stream = _stream(0, 10)
    stream.add_chunk(make_chunk(50, 60, T0 + 9, None))
    assert _at(stream, 30).end == 10
    assert _at(stream, 55).ts_ns == T0 + 9


def test_prune_keeps_the_chunk_of_the_last_consumed_byte() -> None:
    stream = _stream(0, 10, 20, 30)
    stream.consumed(21)  # byte 20 is still needed (a beat at 21 measures from it)
    stream.prune()
    assert [c.start for c in stream.chunks] == [20]
    stream.consumed(30)
    stream.prune()
    assert [c.start for c in stream.chunks] == [20]  # the newest chunk always stays


def test_prune_bounds_the_chunks_of_a_frame_that_never_ends() -> None:
    stream = DirectionStream("c2s")
    for n in range(10_000):
        stream.add_chunk(make_chunk(n, n + 1, T0 + n, None))
        stream.prune()
    assert len(stream.chunks) <= 8192
    assert stream.chunks[0].start == 0 and stream.chunks[-1].start == 9_999


def test_stamp_has_microsecond_datetime_and_date() -> None:
    stamp = make_stamp(T0 + 123_456_789)
    assert stamp.ts.microsecond == 123_456 and stamp.ts.tzinfo is not None
    assert stamp.date.isoformat() == "2023-11-14"


def test_a_stamp_makes_its_datetime_once_and_only_when_asked() -> None:
    chunk = make_chunk(0, 10, T0, ("a.pcapng", 24))
    assert chunk._ts is None  # one per packet: most never reach a row
    first = chunk.ts
    assert chunk.ts is first and chunk.date == first.date()
    assert chunk == make_chunk(0, 10, T0, ("a.pcapng", 24))  # the cache is not compared
