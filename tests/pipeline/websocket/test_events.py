"""The transport's events: frozen values, and StompData's map from STOMP offsets back to the
TCP offset of the WebSocket frame that carried each byte."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from pipeline.net import Direction
from pipeline.websocket.events import (
    Control,
    Event,
    HandshakeSeen,
    NotWebSocket,
    StompData,
    StompGap,
    Violation,
)


def _data(tcp_offset: int, frames: tuple[tuple[int, int], ...] = ()) -> StompData:
    return StompData(Direction.C2S, 1, 1000, tcp_offset, b"x" * 30, False, frames)


def test_bytes_of_a_single_frame_all_map_to_its_start() -> None:
    data = _data(500)
    assert [data.tcp_offset_of(offset) for offset in (0, 1000, 1029, 5000)] == [500] * 4


# Three WebSocket frames: STOMP bytes 1000-1009 from the frame at TCP 500, 1010-1019 from the
# one at 520, 1020-1029 from the one at 560 (a ping between them).
FRAMES = ((1000, 500), (1010, 520), (1020, 560))


@pytest.mark.parametrize(
    ("stomp_offset", "tcp_offset"),
    [
        (1000, 500),
        (1009, 500),
        (1010, 520),  # a frame's first byte belongs to it, not to the one before
        (1019, 520),
        (1020, 560),
        (1029, 560),
        (1100, 560),  # past the last frame's start: still the last frame
    ],
)
def test_each_byte_maps_to_the_frame_that_carried_it(stomp_offset: int, tcp_offset: int) -> None:
    assert _data(500, FRAMES).tcp_offset_of(stomp_offset) == tcp_offset


def test_an_offset_before_the_first_frame_maps_to_the_data_s_own_start() -> None:
    assert _data(499, FRAMES).tcp_offset_of(999) == 499


def test_whole_message_and_frames_have_defaults_only_where_documented() -> None:
    data = StompData(Direction.S2C, 7, 0, 0, b"\n", True)
    assert data.frames == () and data.whole_message
    control = Control(Direction.S2C, 7, 0, "ping", 0, b"")
    assert (control.close_code, control.close_reason, control.rtt_ns) == (None, None, None)
    seen = HandshakeSeen(7, "/ws", None, None, None, None, None, None, None, None, False)
    assert seen.request_ns is None


@pytest.mark.parametrize(
    "event",
    [
        _data(500, FRAMES),
        StompGap(Direction.C2S, 1, 10, 500),
        Control(Direction.S2C, 1, 0, "close", 2, b"\x03\xe8", close_code=1000),
        Violation(None, 1, None, None, "websocket_gap", "lost"),
        HandshakeSeen(1, "/ws", "h", "o", "ua", "v12.stomp", "v12.stomp", None, None, 101, True),
        NotWebSocket(1),
    ],
)
def test_every_event_is_frozen_and_slotted(event: Event) -> None:
    first_field = dataclasses.fields(event)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(event, first_field, None)
    assert not hasattr(event, "__dict__")
    assert event == dataclasses.replace(event)  # values: equal when their fields are


def test_event_is_the_union_of_the_six_kinds() -> None:
    assert set(typing.get_args(Event)) == {
        StompData,
        StompGap,
        Control,
        Violation,
        HandshakeSeen,
        NotWebSocket,
    }
