"""The decoder's size limits: ActiveMQ's defaults, and the bound under which a header block
needs no line-by-line check."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.stomp.commands import LONGEST_COMMAND
from pipeline.stomp.limits import Limits


def test_defaults_are_activemq_s() -> None:
    # ActiveMQ's StompWireFormat: MAX_COMMAND_LENGTH 1024, MAX_HEADER_LENGTH 1024 * 10,
    # MAX_HEADERS 1000, MAX_DATA_LENGTH 1024 * 1024 * 100.
    assert Limits() == Limits(
        max_command=1024, max_header_line=10240, max_headers=1000, max_body=104_857_600
    )


def test_the_defaults_admit_every_command_and_the_largest_body_s_content_length() -> None:
    limits = Limits()
    assert limits.max_command >= LONGEST_COMMAND
    assert len(f"content-length:{limits.max_body}") <= limits.max_header_line


def test_limits_are_frozen_and_changed_only_by_copy() -> None:
    limits = Limits()
    with pytest.raises(dataclasses.FrozenInstanceError):
        limits.max_body = 1  # type: ignore[misc]
    smaller = dataclasses.replace(limits, max_body=10)
    assert smaller.max_body == 10 and limits.max_body == 100 * 1024 * 1024
    assert not hasattr(limits, "__dict__")  # slots: one per decoder, kept small


@pytest.mark.parametrize(
    ("limits", "bound"),
    [
        (Limits(), 2000),  # two bytes a header ("x" and its LF) times 1000 headers
        (Limits(max_header_line=100), 100),
        (Limits(max_header_line=64, max_headers=32), 64),
        (Limits(max_header_line=65, max_headers=32), 64),
        (Limits(max_headers=0), 0),
    ],
)
def test_head_always_within_is_the_smaller_of_its_two_bounds(limits: Limits, bound: int) -> None:
    assert limits.head_always_within() == bound


@st.composite
def _header_blocks(draw: st.DrawFn, limit: int) -> list[bytes]:
    """Header lines (each at least one byte, no LF) whose block, one LF after each line, is at
    most `limit` bytes."""
    lines: list[bytes] = []
    room = limit
    for size in draw(st.lists(st.integers(min_value=1, max_value=max(1, limit)), max_size=limit)):
        if size + 1 > room:
            break
        lines.append(draw(st.binary(min_size=size, max_size=size)).replace(b"\n", b"x"))
        room -= size + 1
    return lines


@settings(max_examples=200, deadline=None)
@given(
    max_header_line=st.integers(min_value=1, max_value=40),
    max_headers=st.integers(min_value=1, max_value=20),
    data=st.data(),
)
def test_a_block_within_the_bound_breaks_neither_the_line_nor_the_count_limit(
    max_header_line: int, max_headers: int, data: st.DataObject
) -> None:
    limits = Limits(max_header_line=max_header_line, max_headers=max_headers)
    lines = data.draw(_header_blocks(limits.head_always_within()))
    assert len(lines) <= limits.max_headers
    assert all(len(one) <= limits.max_header_line for one in lines)


def test_past_the_bound_a_block_can_break_either_limit() -> None:
    """The bound is not loose: two bytes past it, a block of one-byte headers can be one header
    too many, and a single line one byte too long."""
    by_count = Limits(max_header_line=10240, max_headers=3)
    block = b"a\n" * (by_count.max_headers + 1)
    assert len(block) == by_count.head_always_within() + 2
    assert block.count(b"\n") > by_count.max_headers

    by_line = Limits(max_header_line=8, max_headers=1000)
    line = b"h" * (by_line.max_header_line + 1)
    assert len(line + b"\n") == by_line.head_always_within() + 2
    assert len(line) > by_line.max_header_line
