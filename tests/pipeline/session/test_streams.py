from __future__ import annotations

import pickle

import pytest

from pipeline.session import streams
from pipeline.session.streams import Chunk, DirectionStream

T0 = 1_700_000_000_000_000_000


def _stream(*bounds: int) -> DirectionStream:
    stream = streams.DirectionStream("c2s")
    for n, (start, end) in enumerate(zip(bounds, bounds[1:], strict=False)):
        stream.add_chunk(streams.make_chunk(start, end, T0 + n, ("f", n)))
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
    stream.add_chunk(streams.make_chunk(50, 60, T0 + 9, None))
    assert _at(stream, 30).end == 10
    assert _at(stream, 55).ts_ns == T0 + 9


def test_add_packets_makes_a_chunk_per_packet() -> None:
    stream = _stream(0, 10)
    stream.add_packets(10, [5, 7], [T0 + 1, T0 + 2], [("f", 100), None])
    assert [(c.start, c.end, c.ts_ns, c.file, c.file_offset) for c in stream.chunks] == [
        (0, 10, T0, "f", 0),
        (10, 15, T0 + 1, "f", 100),
        (15, 22, T0 + 2, None, None),
    ]
    assert stream.bytes == 22 and stream.next_offset == 22
    stream.add_packets(22, [], [], [])
    assert len(stream.chunks) == 3 and stream.next_offset == 22
    with pytest.raises(ValueError, match="differ in length"):
        stream.add_packets(22, [1], [], [])


def test_prune_keeps_the_chunk_of_the_last_consumed_byte() -> None:
    stream = _stream(0, 10, 20, 30)
    stream.consumed(21)  # byte 20 is still needed (a beat at 21 measures from it)
    stream.prune()
    assert [c.start for c in stream.chunks] == [20]
    stream.consumed(30)
    stream.prune()
    assert [c.start for c in stream.chunks] == [20]  # the newest chunk always stays


def test_prune_bounds_the_chunks_of_a_frame_that_never_ends() -> None:
    stream = streams.DirectionStream("c2s")
    for n in range(10_000):
        stream.add_chunk(streams.make_chunk(n, n + 1, T0 + n, None))
        stream.prune()
    assert len(stream.chunks) <= 8192
    assert stream.chunks[0].start == 0 and stream.chunks[-1].start == 9_999


def test_stamp_has_microsecond_datetime_and_date() -> None:
    stamp = streams.make_stamp(T0 + 123_456_789)
    assert stamp.ts.microsecond == 123_456 and stamp.ts.tzinfo is not None
    assert stamp.date.isoformat() == "2023-11-14"


def test_a_stamp_makes_its_datetime_once_and_only_when_asked() -> None:
    chunk = streams.make_chunk(0, 10, T0, ("a.pcapng", 24))
    assert chunk._ts is None  # one per packet: most never reach a row
    first = chunk.ts
    assert chunk.ts is first and chunk.date == first.date()
    assert chunk == streams.make_chunk(0, 10, T0, ("a.pcapng", 24))  # the cache is not compared
    assert chunk != streams.make_chunk(0, 10, T0 + 1, ("a.pcapng", 24))


def test_trailing_eols_are_judged_alike() -> None:
    stream = _stream(0, 10, 11, 12)
    assert stream.is_trailing_eol(stream.chunks[1], 10)  # no heart-beating: always trailing
    stream.expected_ms = 1
    assert stream.is_trailing_eol(stream.chunks[1], 10)  # 1 ns after the byte before: trailing
    late = streams.make_chunk(12, 13, T0 + 10_000_000, None)
    stream.add_chunk(late)
    assert not stream.is_trailing_eol(late, 12)  # 10 ms after the byte before it: a beat
    beat = streams.make_chunk(13, 14, T0 + 10_000_001, None)
    beat.beat_message = True
    assert not stream.is_trailing_eol(beat, 13)


def test_carried_streams_pickle_whole() -> None:
    stream = _stream(0, 10, 20)
    stream.start(20, "1.2", lenient=False, resync=False)
    stream.expected_ms, stream.frames, stream.heartbeats, stream.eof = 500, 3, 2, True
    stream.trailer_chunk = stream.chunks[1]
    chunk = stream.chunks[0]
    chunk.tcp_start, chunk.tcp_frames, chunk.beat_message = 4, ((5, 9),), True
    copy = pickle.loads(pickle.dumps(stream))
    assert type(copy) is type(stream) and copy.chunks == stream.chunks
    assert copy.trailer_chunk is copy.chunks[1]
    for name in ("direction", "origin", "next_offset", "keep_from", "trailer_end", "bytes"):
        assert getattr(copy, name) == getattr(stream, name), name
    assert (copy.expected_ms, copy.frames, copy.heartbeats, copy.eof) == (500, 3, 2, True)
    assert copy.decoder is not None and copy.decoder.version == "1.2"
