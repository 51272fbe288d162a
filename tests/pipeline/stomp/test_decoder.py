"""The decoder's behaviour: events and offsets, versions, escapes, content-length, heart-beats,
limits, resync, gaps, end of stream, pickling. Each malformed case gives its documented
violation and decoding continues."""

from __future__ import annotations

import pickle
import time
from typing import Any

import pytest

from pipeline.stomp import NEED_DATA, Decoder, Frame, HeartBeat, Limits, Violation, encode_frame
from tests.pipeline.stomp.stomp_streams import (
    beats,
    decode,
    frames,
    kinds,
    only_frame,
    pull,
    stream_violations,
)

SEND = b"SEND\ndestination:/queue/a\n\nhello\x00"
ACK = b"ACK\nid:7\n\n\x00"


# -- events and offsets -----------------------------------------------------------------------


def test_frame_offsets_cover_command_to_nul() -> None:
    events = decode(SEND + b"\n" + ACK)
    first, beat, second = events
    assert isinstance(first, Frame) and isinstance(second, Frame)
    assert (first.start, first.end) == (0, len(SEND))
    assert beat == HeartBeat(offset=len(SEND), length=1)
    assert isinstance(beat, HeartBeat)
    assert beat.offset == first.end  # the EOL right after the NUL
    assert (second.start, second.end) == (len(SEND) + 1, len(SEND) + 1 + len(ACK))


def test_crlf_heart_beat_has_length_two() -> None:
    assert decode(b"\r\n\n\r\n") == [HeartBeat(0, 2), HeartBeat(2, 1), HeartBeat(3, 2)]


def test_lone_cr_waits_for_its_lf() -> None:
    decoder = Decoder("1.2")
    decoder.feed(b"\r")
    assert decoder.next_event() is NEED_DATA
    decoder.feed(b"\n")
    assert decoder.next_event() == HeartBeat(0, 2)


def test_offsets_start_where_the_caller_says() -> None:
    events = decode(b"\n" + ACK, offset=1000)
    assert events[0] == HeartBeat(1000)
    assert isinstance(events[1], Frame) and events[1].start == 1001


def test_offset_points_at_the_first_unconsumed_byte() -> None:
    decoder = Decoder("1.2", offset=10)
    decoder.feed(ACK + b"SEND\ndest")
    assert decoder.offset == 10
    assert isinstance(decoder.next_event(), Frame)
    assert decoder.offset == 10 + len(ACK)
    assert decoder.next_event() is NEED_DATA
    assert decoder.offset == 10 + len(ACK)  # the partial SEND is not consumed yet


def test_events_drains_everything_available() -> None:
    decoder = Decoder("1.2")
    decoder.feed(SEND + b"\n" + ACK + b"SEND\n")
    assert [type(event) for event in decoder.events()] == [Frame, HeartBeat, Frame]
    assert decoder.events() == []


def test_events_pass_through_memoryview_and_bytearray() -> None:
    decoder = Decoder("1.2")
    decoder.feed(memoryview(SEND))
    decoder.feed(bytearray(ACK))
    assert [frame.command for frame in frames(decoder.events())] == ["SEND", "ACK"]


# -- versions, escapes, leniency -----------------------------------------------------------------


def test_version_switch_applies_to_the_next_frame_even_if_already_buffered() -> None:
    decoder = Decoder()  # no accept-version seen yet: 1.0
    decoder.feed(b"CONNECTED\nversion:1.2\n\n\x00MESSAGE\nmessage-id:a\\cb\n\n\x00")
    connected = decoder.next_event()
    assert isinstance(connected, Frame) and connected.command == "CONNECTED"
    decoder.version = connected.get("version")  # type: ignore[assignment]
    message = decoder.next_event()
    assert isinstance(message, Frame) and message.get("message-id") == "a:b"


def test_version_1_0_keeps_backslashes() -> None:
    frame = only_frame(b"MESSAGE\nmessage-id:ID\\chost\\c1\n\n\x00", "1.0")
    assert frame.get("message-id") == "ID\\chost\\c1"
    assert frame.violations == ()


@pytest.mark.parametrize(
    ("version", "raw", "value"),
    [
        ("1.1", b"a\\nb\\cc\\\\d", "a\nb:c\\d"),
        ("1.2", b"a\\r\\nb", "a\r\nb"),
        ("1.2", b"\\\\\\\\c", "\\\\c"),  # two escaped backslashes, then a plain c
        ("1.1", b"\\\\\\c", "\\:"),
    ],
)
def test_escapes_per_version(version: str, raw: bytes, value: str) -> None:
    frame = only_frame(b"SEND\nx:" + raw + b"\n\n\x00", version)
    assert frame.header_list == [("x", value)]
    assert frame.violations == ()


@pytest.mark.parametrize(
    ("version", "raw"), [("1.1", b"a\\rb"), ("1.2", b"a\\tb"), ("1.2", b"ab\\")]
)
def test_undefined_escape_is_reported_and_the_raw_value_kept(version: str, raw: bytes) -> None:
    frame = only_frame(b"SEND\nx:" + raw + b"\ny:\\c\n\n\x00", version)
    assert frame.header_list == [("x", raw.decode()), ("y", ":")]
    assert [(v.kind, v.offset) for v in frame.violations] == [("undefined_escape", 5)]


def test_connect_and_connected_are_not_unescaped_in_1_2_but_are_in_1_1() -> None:
    wire = b"CONNECTED\nsession:a\\cb\n\n\x00"
    assert only_frame(wire, "1.2").get("session") == "a\\cb"
    assert only_frame(wire, "1.1").get("session") == "a:b"
    assert only_frame(b"STOMP\nlogin:a\\cb\n\n\x00", "1.2").get("login") == "a\\cb"


def test_crlf_before_1_2_is_reported_but_decoded() -> None:
    frame = only_frame(b"SEND\r\nx:1\r\ny:2\r\n\r\nbody\x00", "1.1")
    assert (frame.command, frame.header_list, frame.body) == ("SEND", [("x", "1"), ("y", "2")],
                                                              b"body")
    assert [v.kind for v in frame.violations] == ["crlf_before_1_2", "crlf_before_1_2"]
    assert frame.violations[1].detail == "2 line(s)"


def test_crlf_in_1_2_is_plain_eol() -> None:
    frame = only_frame(b"SEND\r\nx:1\r\n\r\nbody\x00", "1.2")
    assert frame.header_list == [("x", "1")]
    assert frame.violations == ()


def test_lenient_mode_reports_each_leniency_it_used() -> None:
    frame = only_frame(b"Message  \nMessage-Id:  7 \ncontent-length: 2\n\nhi\x00", "1.0",
                       lenient=True)
    assert frame.command == "MESSAGE"
    assert frame.header_list == [("message-id", "7"), ("content-length", "2")]
    assert frame.content_length == 2
    assert [(v.kind, v.offset) for v in frame.violations] == [
        ("trailing_whitespace", 0),
        ("lowercase_command", 0),
        ("trailing_whitespace", 10),
        ("uppercase_header_name", 10),
        ("leading_space_in_value", 10),
    ]


def test_strict_mode_keeps_the_early_form_as_sent() -> None:
    frame = only_frame(b"send\nDestination: /q\n\n\x00", "1.0")
    assert frame.command == "send"
    assert frame.header_list == [("Destination", " /q")]
    assert [v.kind for v in frame.violations] == ["unknown_command"]


# -- bodies and content-length -------------------------------------------------------------------


def test_content_length_body_may_contain_nul_and_eols() -> None:
    body = b"\x00\n\n\x00\r\n"
    frame = only_frame(encode_frame("SEND", [("destination", "/q")], body))
    assert frame.body == body
    assert frame.content_length == len(body)


def test_without_content_length_the_first_nul_ends_the_body() -> None:
    events = decode(b"SEND\ndestination:/q\n\nab\x00" + ACK)
    assert [(f.command, f.body) for f in frames(events)] == [("SEND", b"ab"), ("ACK", b"")]


def test_repeated_content_length_first_wins() -> None:
    frame = only_frame(b"SEND\ncontent-length:2\ncontent-length:9\n\nhi\x00")
    assert frame.content_length == 2
    assert frame.header_list == [("content-length", "2"), ("content-length", "9")]


def test_content_length_followed_by_no_nul_resyncs_to_the_next_frame() -> None:
    broken = b"SEND\ncontent-length:2\n\nhello\x00"
    events = decode(broken + b"\n" + ACK)
    assert stream_violations(events)[0] == Violation(
        "content_length_mismatch", broken.index(b"hello") + 2,
        "no NUL after the 2-byte SEND body; resyncing",
    )
    assert stream_violations(events)[1] == Violation(
        "resync_skipped", 0, f"skipped {len(broken)} bytes to reach a frame start"
    )
    assert [f.command for f in frames(events)] == ["ACK"]
    assert beats(events) == [HeartBeat(len(broken))]


@pytest.mark.parametrize("value", [b"x", b"-1", b"+3", b"1_0", b" 3", b""])
def test_invalid_content_length_falls_back_to_the_first_nul(value: bytes) -> None:
    frame = only_frame(b"SEND\ncontent-length:" + value + b"\n\nab\x00", "1.2")
    assert frame.body == b"ab"
    assert frame.content_length is None
    assert [(v.kind, v.offset) for v in frame.violations] == [("invalid_content_length", 5)]


def test_padded_content_length_is_accepted_in_1_0() -> None:
    assert only_frame(b"SEND\ncontent-length: 2 \n\nab\x00", "1.0").content_length == 2


def test_body_on_a_command_that_must_not_have_one() -> None:
    frame = only_frame(b"SUBSCRIBE\nid:1\n\nxyz\x00")
    assert frame.body == b"xyz"
    assert [(v.kind, v.offset) for v in frame.violations] == [("unexpected_body", 16)]


# -- commands, headers ------------------------------------------------------------------------


def test_unknown_command_is_kept_as_sent() -> None:
    events = decode(b"HELLO\nx:1\n\n\x00" + ACK)
    assert [f.command for f in frames(events)] == ["HELLO", "ACK"]
    assert kinds(events) == ["unknown_command"]


def test_nack_is_not_a_1_0_command() -> None:
    assert kinds(decode(b"NACK\nid:1\n\n\x00", "1.0")) == ["command_not_in_version"]
    assert kinds(decode(b"NACK\nid:1\n\n\x00", "1.1")) == []
    assert kinds(decode(b"STOMP\naccept-version:1.2\n\n\x00", "1.0")) == []


def test_non_utf8_header_is_replaced_and_reported() -> None:
    events = decode(b"SEND\nx:\xff\xfe\ny:ok\n\n\x00" + ACK)
    frame = frames(events)[0]
    assert frame.header_list == [("x", "\ufffd\ufffd"), ("y", "ok")]
    assert [(v.kind, v.offset) for v in frame.violations] == [("invalid_utf8", 5)]
    assert frames(events)[1].command == "ACK"


def test_non_utf8_command_is_replaced_and_reported() -> None:
    frame = only_frame(b"SE\xffND\n\n\x00")
    assert frame.command == "SE\ufffdND"
    assert [v.kind for v in frame.violations] == ["invalid_utf8", "unknown_command"]


def test_header_without_colon_and_empty_name() -> None:
    frame = only_frame(b"SEND\nnocolon\n:v\nx:1\n\n\x00")
    assert frame.header_list == [("", "v"), ("x", "1")]
    assert [v.kind for v in frame.violations] == ["header_without_colon", "empty_header_name"]


def test_repeated_headers_first_wins_all_kept() -> None:
    frame = only_frame(b"MESSAGE\nfoo:1\nbar:2\nfoo:3\n\n\x00")
    assert frame.headers == {"foo": "1", "bar": "2"}
    assert frame.header_list == [("foo", "1"), ("bar", "2"), ("foo", "3")]


def test_nul_before_the_blank_line_ends_the_frame() -> None:
    events = decode(b"SEND\nx:1\n\x00" + ACK)
    first = frames(events)[0]
    assert (first.header_list, first.body, first.end) == ([("x", "1")], b"", 10)
    assert [v.kind for v in first.violations] == ["missing_blank_line"]
    assert frames(events)[1].command == "ACK"


def test_stray_nuls_between_frames() -> None:
    events = decode(ACK + b"\x00\x00\x00" + ACK)
    assert events[1] == Violation("stray_nul", len(ACK), "3 NUL byte(s) between frames")
    assert [f.command for f in frames(events)] == ["ACK", "ACK"]


# -- limits ---------------------------------------------------------------------------------------

SMALL = Limits(max_command=16, max_header_line=32, max_headers=4, max_body=64)


@pytest.mark.parametrize(
    ("wire", "kind", "offset"),
    [
        (b"X" * 17 + b"\n\n\x00", "command_too_long", 0),
        (b"SEND\nx:" + b"y" * 31 + b"\n\n\x00", "header_line_too_long", 5),
        (b"SEND\n" + b"a:1\n" * 5 + b"\n\x00", "too_many_headers", 21),
        (b"SEND\ncontent-length:65\n\n" + b"b" * 65 + b"\x00", "body_too_large", 24),
        (b"SEND\n\n" + b"b" * 65 + b"\x00", "body_too_large", 6),
    ],
)
def test_each_limit_is_a_violation_then_resync(wire: bytes, kind: str, offset: int) -> None:
    for chunks in (None, [1] * len(wire), [7] * len(wire)):
        events = decode(wire + b"\n" + ACK, limits=SMALL, chunks=chunks)
        assert stream_violations(events)[0].kind == kind
        assert stream_violations(events)[0].offset == offset
        assert stream_violations(events)[1] == Violation(
            "resync_skipped", 0, f"skipped {len(wire)} bytes to reach a frame start"
        )
        assert [f.command for f in frames(events)] == ["ACK"]


def test_limits_at_their_exact_size_are_accepted() -> None:
    wire = (
        b"SEND\n" + b"x:" + b"y" * 30 + b"\n" + b"a:1\n" * 3
        + b"content-length:64\n\n" + b"b" * 64 + b"\x00"
    )
    frame = only_frame(wire, limits=Limits(max_command=4, max_header_line=32, max_headers=5,
                                            max_body=64))
    assert len(frame.body) == 64


def test_an_endless_header_line_never_grows_the_buffer() -> None:
    decoder = Decoder("1.2", limits=SMALL)
    decoder.feed(b"SEND\nx:")
    events = []
    for _ in range(1000):
        decoder.feed(b"y" * 1000)
        events += pull(decoder)
    assert [event.kind for event in events] == ["header_line_too_long"]  # type: ignore[union-attr]
    assert len(pickle.dumps(decoder)) < 4096
    assert decoder.offset > 990_000  # the skipped bytes were let go


def test_an_endless_body_without_nul_never_grows_the_buffer() -> None:
    decoder = Decoder("1.2", limits=SMALL)
    decoder.feed(b"SEND\n\n")
    for _ in range(1000):
        decoder.feed(b"b" * 1000)
        pull(decoder)
    assert len(pickle.dumps(decoder)) < 4096


# -- resync, gaps, end of stream ----------------------------------------------------------------


def test_stream_starting_mid_frame_skips_to_the_first_plausible_frame() -> None:
    tail = b"ination:/queue/a\n\nMESSAGE\nfake:1\n\nhello\x00\n"
    events = decode(tail + SEND, resync=True)
    assert events[0] == Violation("resync_skipped", 0, f"skipped {len(tail) - 1} bytes to reach "
                                                       "a frame start")
    assert events[1] == HeartBeat(len(tail) - 1)
    assert [(f.command, f.start) for f in frames(events)] == [("SEND", len(tail))]


def test_stream_starting_on_a_frame_boundary_skips_nothing() -> None:
    events = decode(b"\n" + SEND, resync=True)
    assert events[0] == HeartBeat(0)
    assert frames(events)[0].start == 1
    assert stream_violations(events) == []


def test_resync_ignores_nul_followed_by_a_non_command() -> None:
    events = decode(b"tail\x00NOT A FRAME\x00" + ACK, resync=True)
    assert events[0] == Violation("resync_skipped", 0, "skipped 17 bytes to reach a frame start")
    assert frames(events)[0].command == "ACK"


def test_gap_drops_the_frame_in_progress_and_resyncs() -> None:
    decoder = Decoder("1.2")
    decoder.feed(ACK + SEND[:10])
    decoder.feed_gap(100)
    decoder.feed(b"rest of the lost frame\x00" + ACK)
    events = pull(decoder)
    gap_end = len(ACK) + 10 + 100
    assert [type(event) for event in events] == [Frame, Violation, Violation, Frame]
    assert events[1] == Violation(
        "frame_cut_by_gap", len(ACK), "10 bytes of an unfinished frame dropped before a "
        "100-byte gap"
    )
    assert events[2] == Violation("resync_skipped", gap_end, "skipped 23 bytes to reach a frame "
                                                             "start")
    assert events[3].start == gap_end + 23  # type: ignore[union-attr]


def test_gap_on_a_frame_boundary_loses_nothing_after_it() -> None:
    decoder = Decoder("1.2")
    decoder.feed(ACK)
    decoder.feed_gap(5)
    decoder.feed(SEND)
    events = pull(decoder)
    assert [(f.command, f.start) for f in frames(events)] == [("ACK", 0), ("SEND", len(ACK) + 5)]
    assert stream_violations(events) == []


def test_eof_inside_a_frame_is_a_truncated_frame() -> None:
    events = decode(ACK + SEND[:-3])
    assert events[-1] == Violation("truncated_frame", len(ACK),
                                   f"stream ended {len(SEND) - 3} bytes into a SEND frame")


def test_eof_during_resync_reports_what_was_skipped() -> None:
    assert decode(b"no frame here", resync=True) == [
        Violation("resync_skipped", 0, "skipped 13 bytes, no frame start before end of stream")
    ]


def test_data_after_eof_is_reported_once_and_ignored() -> None:
    decoder = Decoder("1.2")
    decoder.feed_eof()
    decoder.feed(ACK)
    decoder.feed(ACK)
    assert decoder.events() == [Violation("data_after_eof", 0, f"{len(ACK)} bytes ignored")]


# -- fast path and state machine agree on the seams between them ----------------------------------

TRICKY = [
    b"SEND\na:b\n\x00SEND\n\n\x00",  # NUL before the blank line, then a clean frame
    b"SEND\ncontent-length:3\n\n\x00SEND\n\n\x00",  # content-length overruns the NUL
    b"SEND\na:b\r\n\r\none\n\ntwo\x00",  # CRLF blank line, LF LF inside the body
    b"ACK\nid:1\n\nbody\x00ACK\nid:2\n\n\x00",  # body where none is allowed
    b"SEND\ncontent-length:x\n\nab\x00",
    b"SEND\n" + b"h:v\n" * 600 + b"\nbody\x00",  # header block past the fast path's window
    ACK + b"\x00\x00" + ACK,
    b"SEND\ncontent-length:5\n\na\x00b\x00c\x00\n",
]


@pytest.mark.parametrize("wire", TRICKY)
@pytest.mark.parametrize("version", ["1.0", "1.2"])
def test_whole_and_byte_by_byte_agree(wire: bytes, version: str) -> None:
    assert decode(wire, version) == decode(wire, version, chunks=[1] * len(wire))


# -- state --------------------------------------------------------------------------------------


def test_decoder_pickles_mid_frame() -> None:
    decoder = Decoder("1.1", offset=50)
    decoder.feed(SEND[:12])
    revived = pickle.loads(pickle.dumps(decoder))
    revived.feed(SEND[12:])
    frame = revived.next_event()
    assert isinstance(frame, Frame) and (frame.start, frame.body) == (50, b"hello")
    assert revived.version == "1.1"


def test_decoded_events_pickle() -> None:
    events = decode(SEND + b"\n" + ACK + b"SEND\nx:\\q\n\n\x00" + b"\x00")
    assert pickle.loads(pickle.dumps(events)) == events


def test_need_data_survives_pickling() -> None:
    assert pickle.loads(pickle.dumps(NEED_DATA)) is NEED_DATA


def test_unknown_version_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        Decoder("2.0")
    decoder = Decoder()
    with pytest.raises(ValueError):
        decoder.version = "1.3"


@pytest.mark.timeout(60)
def test_many_crlf_frames_in_one_buffer_decode_in_linear_time() -> None:
    # A search for an LF LF blank line alone would scan to the buffer's end for every CRLF
    # frame: quadratic, minutes for this buffer. Line by line it takes well under a second.
    frame = encode_frame("SEND", [("destination", "/q"), ("x", "y")], b"b" * 100, eol=b"\r\n")
    events = decode((frame + b"\n") * 20_000)
    assert len(frames(events)) == 20_000


# -- every violation kind, with decoding going on after it --------------------------------------

MALFORMED: dict[str, tuple[bytes, dict[str, object]]] = {
    "resync_skipped": (b"tail of a frame\x00", {"resync": True}),
    "content_length_mismatch": (b"SEND\ncontent-length:1\n\nab\x00", {}),
    "command_too_long": (b"X" * 20 + b"\n\n\x00", {"limits": SMALL}),
    "header_line_too_long": (b"SEND\nx:" + b"y" * 40 + b"\n\n\x00", {"limits": SMALL}),
    "too_many_headers": (b"SEND\n" + b"a:1\n" * 5 + b"\n\x00", {"limits": SMALL}),
    "body_too_large": (b"SEND\n\n" + b"b" * 65 + b"\x00", {"limits": SMALL}),
    "stray_nul": (b"\x00", {}),
    "unknown_command": (b"HELLO\n\n\x00", {}),
    "command_not_in_version": (b"NACK\nid:1\n\n\x00", {"version": "1.0"}),
    "unexpected_body": (b"ACK\nid:1\n\nbody\x00", {}),
    "invalid_content_length": (b"SEND\ncontent-length:x\n\nab\x00", {}),
    "invalid_utf8": (b"SEND\nx:\xff\n\n\x00", {}),
    "undefined_escape": (b"SEND\nx:\\t\n\n\x00", {}),
    "header_without_colon": (b"SEND\nx\n\n\x00", {}),
    "empty_header_name": (b"SEND\n:x\n\n\x00", {}),
    "missing_blank_line": (b"SEND\nx:1\n\x00", {}),
    "crlf_before_1_2": (b"SEND\r\n\r\n\x00", {"version": "1.1"}),
    "lowercase_command": (b"send\n\n\x00", {"lenient": True}),
    "uppercase_header_name": (b"SEND\nX:1\n\n\x00", {"lenient": True}),
    "trailing_whitespace": (b"SEND \n\n\x00", {"lenient": True}),
    "leading_space_in_value": (b"SEND\nx: 1\n\n\x00", {"lenient": True}),
}
# Kinds that need a gap or the end of the stream: covered by the gap/EOF tests above.
AT_GAPS_AND_EOF = {"frame_cut_by_gap", "truncated_frame", "data_after_eof"}


def test_every_kind_has_a_case() -> None:
    from pipeline.stomp.violations import ALL_KINDS

    assert set(MALFORMED) | AT_GAPS_AND_EOF == ALL_KINDS


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_each_malformed_case_gives_its_violation_and_decoding_goes_on(kind: str) -> None:
    wire, malformed_options = MALFORMED[kind]
    options: dict[str, Any] = dict(malformed_options)
    version = str(options.pop("version", "1.2"))
    events = decode(wire + b"\n" + ACK, version, **options)
    assert kind in kinds(events)
    last = events[-1]
    assert isinstance(last, Frame) and (last.command, last.end) == ("ACK", len(wire) + 1 + len(ACK))


def test_many_frames_ended_by_nul_before_any_blank_line_decode_in_linear_time() -> None:
    # Each frame's head used to be searched for a blank line up to the end of the buffer before
    # its NUL was considered: a buffer of such frames took time quadratic in its size.
    wire = b"SEND\na:b\n\x00" * 10_000
    started = time.monotonic()
    events = decode(wire, "1.2")
    assert time.monotonic() - started < 5  # well under 1 s; about a minute when quadratic
    assert len(frames(events)) == 10_000
    assert all([v.kind for v in f.violations] == ["missing_blank_line"] for f in frames(events))
