"""Header block decoding: fast path and line-by-line path give the same answers."""

from __future__ import annotations

import pytest

from pipeline.stomp.headers import decode_header_block, escapes_apply, unescape


@pytest.mark.parametrize(
    ("text", "version", "expected"),
    [
        ("plain", "1.2", "plain"),
        ("a\\cb", "1.1", "a:b"),
        ("\\\\n", "1.1", "\\n"),
        ("\\\\\\n", "1.1", "\\\n"),
        ("\\r", "1.2", "\r"),
        ("\\r", "1.1", None),
        ("\\t", "1.2", None),
        ("end\\", "1.2", None),
    ],
)
def test_unescape(text: str, version: str, expected: str | None) -> None:
    assert unescape(text, version) == expected


def test_escapes_apply() -> None:
    assert not escapes_apply("1.0", "SEND")
    assert escapes_apply("1.1", "CONNECT")
    assert not escapes_apply("1.2", "CONNECT")
    assert not escapes_apply("1.2", "CONNECTED")
    assert escapes_apply("1.2", "SEND")


def test_clean_block_in_wire_order_with_repeats() -> None:
    pairs, problems = decode_header_block(b"a:1\nb:x:y\na:2\nc:", 10, "1.0", "SEND", False)
    assert pairs == [("a", "1"), ("b", "x:y"), ("a", "2"), ("c", "")]
    assert problems == []


def test_problem_offsets_point_at_their_lines() -> None:
    raw = b"ok:1\nbroken\n:empty\nbad:\xff\nesc:\\q"
    pairs, problems = decode_header_block(raw, 100, "1.2", "SEND", False)
    assert pairs == [("ok", "1"), ("", "empty"), ("bad", "\ufffd"), ("esc", "\\q")]
    assert [(kind, offset) for kind, offset, _ in problems] == [
        ("header_without_colon", 105),
        ("empty_header_name", 112),
        ("invalid_utf8", 119),
        ("undefined_escape", 125),
    ]


def test_details_never_quote_values() -> None:
    raw = b"passcode:s3cr\\et\npasscode:\xffs3cret\npasscode s3cret"
    _, problems = decode_header_block(raw, 0, "1.2", "SEND", False)
    assert len(problems) == 3
    assert all("s3cr" not in detail for _, _, detail in problems)


@pytest.mark.parametrize(
    "raw",
    [b"a:1\nb:2", b"a:1\r\nb:2\r", b"x:a\\cb\nx:\\\\", b"k:\xc3\xa9\xe2\x82\xac", b"a:b\\nc"],
)
@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_fast_path_matches_line_by_line(raw: bytes, version: str) -> None:
    from pipeline.stomp.headers import _decode_line_by_line

    pairs, problems = decode_header_block(raw, 0, version, "SEND", False)
    assert (pairs, problems) == _decode_line_by_line(raw, 0, version, "SEND", False)
