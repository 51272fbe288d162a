"""Plausible frame starts."""

from __future__ import annotations

import pytest

from pipeline.stomp.resync import plausible_frame_start


@pytest.mark.parametrize(
    ("data", "lenient", "verdict"),
    [
        (b"SEND\n", False, True),
        (b"\n\r\nMESSAGE\r\n", False, True),
        (b"send\n", False, False),
        (b"send  \n", True, True),
        (b"SENDX\n", False, False),
        (b"SEN", False, None),
        (b"SEND", False, None),
        (b"SEND\r", False, None),
        (b"XYZ", False, False),
        (b"", False, None),
        (b"\n\n", False, None),
        (b"\r", False, None),
        (b"\rX", False, False),
        (b"UNSUBSCRIBE-TOO-LONG", False, False),
        (b"\n" * 1100 + b"SEND\n", False, False),
    ],
)
def test_plausible_frame_start(data: bytes, lenient: bool, verdict: bool | None) -> None:
    assert plausible_frame_start(data, 0, lenient) is verdict


def test_index_is_respected() -> None:
    assert plausible_frame_start(b"xx\x00ACK\n", 3, False) is True
    assert plausible_frame_start(bytearray(b"xx\x00ACK\n"), 2, False) is False
