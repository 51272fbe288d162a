"""The fast path frames clean frames and stops, position on the frame, at anything else."""

from __future__ import annotations

import pytest

from pipeline.stomp import Frame, HeartBeat, Limits
from pipeline.stomp.fast_path import scan

CLEAN = b"SEND\ndestination:/q\ncontent-length:2\n\nhi\x00\nACK\nid:1\n\n\x00"


def test_clean_frames_and_beats_up_to_the_end() -> None:
    out: list = []
    assert scan(CLEAN, 0, 100, "1.2", Limits(), out, -1) == len(CLEAN)
    assert [type(event) for event in out] == [Frame, HeartBeat, Frame]
    assert out[0].start == 100 and out[0].get("destination") == "/q"
    assert out[1] == HeartBeat(100 + CLEAN.index(b"\nACK"))


def test_limit_counts_events() -> None:
    out: list = []
    assert scan(CLEAN, 0, 0, "1.2", Limits(), out, 2) == CLEAN.index(b"ACK")
    assert len(out) == 2


@pytest.mark.parametrize(
    "unclean",
    [
        b"SEND\r\n\r\n\x00",  # CRLF
        b"SEND\nx:1\n\x00",  # NUL before the blank line
        b"FOO\n\n\x00",  # unknown command
        b"SEND\ncontent-length:x\n\nab\x00",
        b"SEND\ncontent-length:1\n\nab\x00",  # no NUL where the length says
        b"ACK\n\nbody\x00",  # body where none is allowed
        b"SEND\n" + b"h:v\n" * 600 + b"\n\x00",  # past the head window
        b"\x00",
    ],
)
def test_stops_on_the_first_unclean_frame(unclean: bytes) -> None:
    out: list = []
    wire = b"ACK\nid:1\n\n\x00" + unclean + CLEAN
    assert scan(wire, 0, 0, "1.2", Limits(), out, -1) == len(b"ACK\nid:1\n\n\x00")
    assert len(out) == 1


def test_stops_on_a_partial_frame() -> None:
    out: list = []
    assert scan(b"\nSEND\n\nno NUL yet", 0, 0, "1.2", Limits(), out, -1) == 1


def test_nack_is_not_clean_in_1_0() -> None:
    out: list = []
    assert scan(b"NACK\nid:1\n\n\x00", 0, 0, "1.0", Limits(), out, -1) == 0
    assert scan(b"NACK\nid:1\n\n\x00", 0, 0, "1.1", Limits(), out, -1) == 12


@pytest.mark.parametrize(
    ("wire", "body", "content_length"),
    [
        (b"SEND\ncontent-length:0\n\n\x00", b"", 0),  # the command line's LF starts it
        (b"SEND\nx:content-length:5\n\nhi\x00", b"hi", None),  # inside a value: not the header
        (b"SEND\nxcontent-length:5\n\nhi\x00", b"hi", None),  # another header's name
        (b"SEND\ncontent-length:2\ncontent-length:9\n\nhi\x00", b"hi", 2),  # the first wins
        (b"SEND\ncontent-type:a\ncontent-length:3\n\na\x00b\x00", b"a\x00b", 3),
        (b"SEND\nc:1\nx:2\n\n\x00", b"", None),  # lines that start with c
    ],
)
def test_the_head_is_searched_line_by_line(
    wire: bytes, body: bytes, content_length: int | None
) -> None:
    out: list = []
    assert scan(wire, 0, 0, "1.2", Limits(), out, -1) == len(wire)
    (frame,) = out
    assert frame.body == body and frame.content_length == content_length


@pytest.mark.parametrize(
    "partial",
    [
        b"SEND\nh:v\n",  # no blank line yet
        b"SEND\nh:v\n\n",  # the blank line ends the data, no NUL yet
        b"SEND\ncontent-length:1",  # the header not ended
        b"SEND\ncontent-length:",
    ],
)
def test_a_head_cut_by_the_end_of_the_data_waits(partial: bytes) -> None:
    out: list = []
    assert scan(partial, 0, 0, "1.2", Limits(), out, -1) == 0
    assert out == []
