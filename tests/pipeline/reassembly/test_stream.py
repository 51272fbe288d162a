from __future__ import annotations

import pickle
import random
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.reassembly.stream import (
    FIN,
    RST,
    SYN,
    Conflict,
    Data,
    DeliveredTail,
    Gap,
    StreamEvent,
    StreamReassembler,
    _kept_after,
    continues,
)

ISN = 5_000


def data_of(events: list[StreamEvent]) -> bytes:
    return b"".join(e.data for e in events if isinstance(e, Data))


def of_type(events: list[StreamEvent], kind: type[Gap | Conflict]) -> list[tuple[int, int]]:
    return [(e.offset, e.size) for e in events if isinstance(e, kind)]


def feed(r: StreamReassembler, segments: list[tuple[int, bytes]], ts: int = 0) -> list:
    events: list[StreamEvent] = []
    for n, (seq, payload) in enumerate(segments):
        events += r.add(seq, payload, ts + n)
    return events


def check_offsets(events: list[StreamEvent]) -> None:
    """Data and Gap events tile the stream from 0 without holes or overlaps."""
    position = 0
    for event in events:
        if isinstance(event, Data):
            assert event.offset == position
            position += len(event.data)
        elif isinstance(event, Gap):
            assert event.offset == position
            position += event.size


def test_in_order_segments_come_out_at_once_with_their_timestamps() -> None:
    r = StreamReassembler(ISN)
    first = r.add(ISN + 1, b"hello ", 10)
    second = r.add(ISN + 7, b"world", 20)
    assert first == [Data(0, 10, b"hello ")]
    assert second == [Data(6, 20, b"world")]
    assert r.offset == 11 and r.next_seq == ISN + 12


def test_syn_sets_the_origin_when_no_isn_was_given() -> None:
    r = StreamReassembler()
    assert r.add(ISN, b"", 1, flags=SYN) == []
    assert r.add(ISN + 1, b"abc", 2) == [Data(0, 2, b"abc")]


def test_without_syn_the_first_data_segment_is_offset_zero() -> None:
    r = StreamReassembler()
    assert r.add(777, b"", 1) == []  # pure ACK before any data: nothing starts
    assert r.add(900, b"xyz", 2) == [Data(0, 2, b"xyz")]
    assert r.add(890, b"0123456789", 3) == []  # before the start: dropped, counted
    assert r.stats.early_bytes == 10


def test_out_of_order_segments_wait_for_the_hole() -> None:
    r = StreamReassembler(ISN)
    assert r.add(ISN + 4, b"defg", 1) == []
    assert r.pending_bytes == 4
    events = r.add(ISN + 1, b"abc", 2)
    assert events == [Data(0, 2, b"abc"), Data(3, 1, b"defg")]
    assert r.pending_bytes == 0


def test_identical_retransmissions_are_dropped() -> None:
    r = StreamReassembler(ISN)
    feed(r, [(ISN + 1, b"abcdef")])
    assert r.add(ISN + 1, b"abcdef", 5) == []
    assert r.add(ISN + 3, b"cdefgh", 6) == [Data(6, 6, b"gh")]
    assert r.stats.duplicate_bytes == 10


def test_overlap_with_different_bytes_keeps_the_first_and_reports_the_span() -> None:
    r = StreamReassembler(ISN)
    feed(r, [(ISN + 1, b"abcdefgh")])
    events = r.add(ISN + 3, b"cXYfghij", 9)
    assert events == [Conflict(3, 2, 9), Data(8, 9, b"ij")]
    assert r.stats.conflict_bytes == 2


def test_conflict_against_buffered_out_of_order_bytes() -> None:
    r = StreamReassembler(ISN)
    assert r.add(ISN + 11, b"KLMNO", 1) == []
    events = r.add(ISN + 9, b"ijklmnop", 2)  # overlaps the buffered piece with other bytes
    assert Conflict(10, 5, 2) in events
    events += r.add(ISN + 1, b"abcdefgh", 3)
    assert data_of(events) == b"abcdefghijKLMNOp"
    check_offsets(events)


def test_in_order_data_does_not_override_bytes_buffered_earlier() -> None:
    r = StreamReassembler(ISN)
    r.add(ISN + 5, b"EFGH", 1)  # arrives first, out of order
    events = r.add(ISN + 1, b"abcdefgh", 2)
    assert data_of(events) == b"abcdEFGH"
    assert of_type(events, Conflict) == [(4, 4)]


def test_keepalives_and_linux_zero_window_probes_are_ignored() -> None:
    r = StreamReassembler(ISN)
    feed(r, [(ISN + 1, b"abcd")])
    assert r.add(ISN + 4, b"\xff", 5) == []  # keep-alive: 1 garbage byte at next - 1
    assert r.add(ISN + 4, b"", 6) == []  # zero-window probe / keep-alive without data
    assert r.add(ISN + 5, b"e", 7) == [Data(4, 7, b"e")]  # BSD probe: the genuine next byte
    assert r.add(ISN + 5, b"e", 8) == []  # ...re-sent once the window opens
    assert r.stats.probes_ignored == 2
    assert r.stats.conflict_bytes == 0


def test_keepalive_while_a_hole_is_open_is_still_ignored() -> None:
    r = StreamReassembler(ISN)
    r.add(ISN + 1, b"ab", 1)
    r.add(ISN + 6, b"fgh", 2)  # bytes 2..4 not captured
    assert r.add(ISN + 8, b"\x00", 3) == []
    events = r.flush()
    assert events == [Gap(2, 3, 2), Data(5, 2, b"fgh")]


def test_sequence_numbers_wrap_around() -> None:
    isn = 2**32 - 3
    r = StreamReassembler(isn)
    events = r.add(2**32 - 2, b"ab", 1)  # seq 2**32 - 2 and 2**32 - 1
    events += r.add(2, b"de", 3)  # after wrapping, out of order
    events += r.add(0, b"cc", 2)  # seq 0 and 1 (first 'c' then the one byte before 'd')
    assert data_of(events) == b"abccde"
    assert r.next_seq == 4 and r.offset == 6


def test_offsets_keep_growing_over_several_wraps() -> None:
    r = StreamReassembler(0)
    chunk = bytes(16 << 20)
    seq = 1
    for n in range(300):  # 4.7 GiB: the 32-bit sequence space wraps once
        events = r.add(seq, chunk, n)
        assert events == [Data(n * len(chunk), n, chunk)]
        seq = (seq + len(chunk)) % 2**32
    assert r.add(seq, b"x", 300) == [Data(300 * len(chunk), 300, b"x")]
    assert r.next_seq == (1 + 300 * len(chunk) + 1) % 2**32


def test_drop_is_a_gap_of_the_right_size_at_flush() -> None:
    r = StreamReassembler(ISN)
    events = feed(r, [(ISN + 1, b"aaaa"), (ISN + 9, b"cccc")])
    assert data_of(events) == b"aaaa"
    events += r.flush()
    assert of_type(events, Gap) == [(4, 4)]
    assert data_of(events) == b"aaaacccc"
    check_offsets(events)


def test_fin_after_a_hole_reports_the_missing_tail() -> None:
    r = StreamReassembler(ISN)
    r.add(ISN + 1, b"abc", 1)
    assert r.add(ISN + 11, b"", 2, flags=FIN) == [Gap(3, 7, 2)]
    assert r.flush() == []


def test_fin_delivers_what_waits_behind_a_lost_segment_before_the_close() -> None:
    # The capture lost "def"; the peer had it, or it would not have taken the FIN. What follows
    # the hole must reach the caller before the FIN does, or it arrives after the stream ended.
    r = StreamReassembler(ISN)
    events = r.add(ISN + 1, b"abc", 1)
    assert r.add(ISN + 7, b"ghi", 2) == []
    assert r.add(ISN + 10, b"jk", 3) == []
    closing = r.add(ISN + 12, b"", 4, flags=FIN)
    assert closing == [Gap(3, 3, 2), Data(6, 2, b"ghi"), Data(9, 3, b"jk")]
    assert r.pending_bytes == 0 and r.flush() == []
    check_offsets(events + closing)


def test_fin_carrying_data_after_a_hole_delivers_it_too() -> None:
    r = StreamReassembler(ISN)
    r.add(ISN + 1, b"abc", 1)
    closing = r.add(ISN + 7, b"ghi", 2, flags=FIN)
    assert closing == [Gap(3, 3, 2), Data(6, 2, b"ghi")]


def test_many_cut_segments_behind_a_hole_stay_linear() -> None:
    # A snaplen-cut capture that lost one segment leaves one known hole per later packet until
    # the stream reaches them: keeping them sorted by re-sorting a list was quadratic.
    started = time.monotonic()
    r = StreamReassembler(ISN)
    seq = ISN + 1 + 1000  # the first 1000 bytes were lost
    for n in range(50_000):
        r.add(seq, b"x" * 30, n, wire_len=1000)
        seq += 1000
    events = r.add(ISN + 1, b"y" * 30, 50_000, wire_len=1000) + r.flush()
    assert time.monotonic() - started < 10  # about 1 s; a minute when it was quadratic
    assert len(of_type(events, Gap)) == 50_001 and len(data_of(events)) == 30 * 50_001
    check_offsets(events)


def test_pending_buffer_is_bounded_and_declares_the_earliest_hole() -> None:
    r = StreamReassembler(ISN, max_pending_bytes=10)
    events = r.add(ISN + 1, b"ab", 1)
    assert r.add(ISN + 5, b"efgh", 2) == []
    assert r.add(ISN + 10, b"jklm", 3) == []  # 8 bytes pending: within bound
    overflow = r.add(ISN + 15, b"opq", 4)  # 11 pending: the first hole (2 bytes) gives way
    assert overflow == [Gap(2, 2, 2), Data(4, 2, b"efgh")]
    assert r.pending_bytes == 7
    check_offsets(events + overflow + r.flush())


def test_memory_stays_bounded_when_a_big_stream_has_an_early_hole() -> None:
    r = StreamReassembler(0, max_pending_bytes=1 << 20, history_bytes=1 << 16)
    chunk = b"z" * 65536
    delivered = 0
    for n in range(1, 200):  # 13 MB after a 1-byte hole that never fills
        for event in r.add(2 + (n - 1) * len(chunk), chunk, n):
            if isinstance(event, Data):
                delivered += len(event.data)
        assert r.pending_bytes <= 1 << 20
        assert len(r._history) <= 2 * (1 << 16)  # noqa: SLF001
        assert r._history.held <= 4 * (1 << 16)  # noqa: SLF001
    assert delivered > 12_000_000


def test_snaplen_cut_payload_becomes_a_gap_and_the_stream_resumes() -> None:
    r = StreamReassembler(ISN)
    events = r.add(ISN + 1, b"abcd", 1, wire_len=10)  # 6 bytes not captured
    assert events == [Data(0, 1, b"abcd"), Gap(4, 6, 1)]
    assert r.add(ISN + 11, b"next", 2) == [Data(10, 2, b"next")]


def test_cut_segment_out_of_order_is_resolved_when_the_stream_reaches_it() -> None:
    r = StreamReassembler(ISN)
    assert r.add(ISN + 5, b"EF", 1, wire_len=6) == []  # bytes 4..9, only 4..5 captured
    r.add(ISN + 11, b"K", 2)
    events = r.add(ISN + 1, b"abcd", 3)
    assert events == [Data(0, 3, b"abcd"), Data(4, 1, b"EF"), Gap(6, 4, 2), Data(10, 2, b"K")]


def test_rst_payload_is_not_stream_data() -> None:
    r = StreamReassembler(ISN)
    assert r.add(ISN + 1, b"connection reset by stack", 1, flags=RST) == []
    assert r.stats.rst_payload_bytes == 25


def test_history_catches_conflicts_only_while_bytes_are_in_it() -> None:
    r = StreamReassembler(ISN, history_bytes=8)
    feed(r, [(ISN + 1, b"a" * 40)])
    assert r.add(ISN + 1, b"b" * 4, 2) == []  # too old to verify: counted as duplicate
    assert r.add(ISN + 38, b"bbb", 3) == [Conflict(37, 3, 3)]


def test_state_survives_pickling_midway() -> None:
    r = StreamReassembler(ISN)
    events = r.add(ISN + 1, b"abc", 1) + r.add(ISN + 7, b"ghi", 2)
    restored = pickle.loads(pickle.dumps(r))
    events += restored.add(ISN + 4, b"def", 3)
    assert data_of(events) == b"abcdefghi"
    assert restored.offset == 9


def test_pickled_state_keeps_the_tail_as_a_bytearray_of_its_bytes() -> None:
    """Carried state keeps its version: the tail pickles as the bytearray it was before
    `DeliveredTail`, and such a state loads."""
    r = StreamReassembler(ISN, history_bytes=8)
    feed(r, [(ISN + 1, b"abcdefghij"), (ISN + 11, b"klm")])
    _, slots = r.__getstate__()
    assert r.__reduce_ex__(5)[2] == (None, slots)  # what pickle saves
    assert slots["_history"] == bytearray(b"cdefghijklm")
    assert set(slots) == set(StreamReassembler.__slots__)
    restored = pickle.loads(pickle.dumps(r))
    assert bytes(restored._history) == b"cdefghijklm"  # noqa: SLF001
    assert restored.add(ISN + 10, b"JK", 3) == [Conflict(9, 2, 3)]


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.integers(min_value=0, max_value=3000), st.booleans(), st.booleans()),
        max_size=60,
    ),
    limit=st.integers(min_value=1, max_value=700),
)
def test_tail_keeps_what_one_bytearray_would(
    steps: list[tuple[int, bool, bool]], limit: int
) -> None:
    """`DeliveredTail` against the reference it replaced: one bytearray, cut and extended."""
    tail, reference = DeliveredTail(), bytearray()
    rng = random.Random(limit)
    for size, mutable, clear in steps:
        if clear:
            tail.clear()
            reference.clear()
            continue
        payload = rng.randbytes(size)
        data: bytes | bytearray = bytearray(payload) if mutable else payload
        kept = _kept_after(len(reference), size, limit)
        tail.keep(data, kept)
        if isinstance(data, bytearray):
            data[:] = bytes(len(data))  # the caller's buffer changes: the tail must not
        reference = (reference + payload)[len(reference) + size - kept :]
        assert len(tail) == kept
        assert bytes(tail) == reference
        assert tail.held <= 4 * limit
        lo = rng.randint(0, kept)
        hi = rng.randint(lo, kept)
        assert tail.between(lo, hi) == reference[lo:hi]


def test_flush_twice_is_harmless() -> None:
    r = StreamReassembler(ISN)
    r.add(ISN + 3, b"cd", 1)
    assert r.flush() == [Gap(0, 2, 1), Data(2, 1, b"cd")]
    assert r.flush() == []


@settings(max_examples=150, deadline=None)
@given(
    data=st.binary(min_size=1, max_size=3000),
    cuts=st.lists(st.integers(min_value=1, max_value=2999), max_size=40),
    seed=st.integers(min_value=0, max_value=2**32),
    isn=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_any_segmentation_order_and_duplication_reproduces_the_bytes(
    data: bytes, cuts: list[int], seed: int, isn: int
) -> None:
    rng = random.Random(seed)
    points = sorted({c for c in cuts if c < len(data)} | {0, len(data)})
    segments = [(points[i], points[i + 1]) for i in range(len(points) - 1)]
    # retransmissions re-cut the same bytes differently
    segments += [
        (lo, min(len(data), lo + rng.randrange(1, 400)))
        for lo, _ in rng.sample(segments, k=len(segments) // 3)
    ]
    rng.shuffle(segments)
    r = StreamReassembler(isn)
    events: list[StreamEvent] = []
    for n, (lo, hi) in enumerate(segments):
        events += r.add((isn + 1 + lo) % 2**32, data[lo:hi], n)
    events += r.flush()
    assert data_of(events) == data
    assert not of_type(events, Gap) and not of_type(events, Conflict)
    check_offsets(events)


@settings(max_examples=300, deadline=None)
@given(
    cuts=st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=40),
    swaps=st.lists(st.integers(min_value=0, max_value=39), max_size=6),
    repeats=st.lists(st.integers(min_value=0, max_value=39), max_size=4),
    isn=st.integers(min_value=0, max_value=(1 << 32) - 1),
    history=st.integers(min_value=1, max_value=64),
    run_max=st.integers(min_value=1, max_value=8),
)
def test_add_run_is_add_for_the_segments_that_continue(
    cuts: list[int], swaps: list[int], repeats: list[int], isn: int, history: int, run_max: int
) -> None:
    """A reassembler given the segments that `continue` one another from its
    `in_order_position` through ``add_run``, up to ``run_max`` at a time (as the flow pass does),
    makes the same data, in the same order, and ends in the same state (the tail kept for
    comparisons included) as one fed through ``add`` alone, whatever the segments' order."""
    stream = bytes(random.Random(isn).randrange(256) for _ in range(sum(cuts)))
    segments, at = [], 0
    for size in cuts:
        segments.append(((isn + 1 + at) % (1 << 32), stream[at : at + size]))
        at += size
    for i in swaps:  # out of order
        j = min(i + 1, len(segments) - 1)
        if i < len(segments):
            segments[i], segments[j] = segments[j], segments[i]
    for i in repeats:  # retransmissions
        if i < len(segments):
            segments.insert(i + 1, segments[i])
    plain = StreamReassembler(isn, history_bytes=history)
    fast = StreamReassembler(isn, history_bytes=history)
    plain_events: list[StreamEvent] = []
    fast_events: list[StreamEvent] = []
    run: list[tuple[int, bytes]] = []  # (capture time, payload), not given to `fast` yet
    position: tuple[int, int] | None = None  # where the run has got to

    def flush_run() -> None:
        if run:
            data = b"".join(payload for _, payload in run)
            offset = fast.add_run(data, [len(payload) for _, payload in run], run[-1][0])
            for ts, payload in run:
                fast_events.append(Data(offset, ts, payload))
                offset += len(payload)
            run.clear()

    for ts, (seq, payload) in enumerate(segments):
        plain_events += plain.add(seq, payload, ts)
        if not run:
            position = fast.in_order_position()
        if position is not None and continues(*position, seq, len(payload)):
            run.append((ts, payload))
            nxt = position[0] + len(payload)
            position = (nxt, max(nxt, position[1]))
            if len(run) == run_max:
                flush_run()
            continue
        flush_run()
        fast_events += fast.add(seq, payload, ts)
    flush_run()
    plain_events += plain.flush()
    fast_events += fast.flush()
    assert fast_events == plain_events
    assert (fast.offset, fast.stats) == (plain.offset, plain.stats)
    assert pickle.dumps(fast) == pickle.dumps(plain)
    assert data_of(fast_events) == stream


def test_in_order_position_is_none_while_add_must_take_segments() -> None:
    r = StreamReassembler()
    assert r.in_order_position() is None  # not started
    r = StreamReassembler(ISN)
    assert r.in_order_position() == (ISN + 1, ISN + 1)
    assert not continues(ISN + 1, ISN + 1, ISN + 5, 5)  # not the next byte
    r.add(ISN + 1, b"ab", 2)
    r.add(ISN + 10, b"later", 3)  # buffered: in-order data must go through add
    assert r.in_order_position() is None
    r = StreamReassembler(ISN)
    r.add(ISN + 1, b"abc", 4)
    assert r.in_order_position() == (ISN + 4, ISN + 4)
    assert not continues(ISN + 4, ISN + 4, ISN + 3, 1)  # re-sends "c"
    assert continues(ISN + 4, ISN + 4, ISN + 4, 1)
    assert not continues(ISN + 4, ISN + 5, ISN + 4, 1)  # one byte re-sending the highest seen
    assert continues((1 << 32) + 2, (1 << 32) + 2, 2, 7)  # sequence numbers wrap
