"""The encoder writes exact wire bytes per version."""

from __future__ import annotations

import pytest

from pipeline.stomp import encode_frame, encode_heartbeat
from pipeline.stomp.encoder import escape
from tests.pipeline.stomp.stomp_streams import only_frame


def test_exact_bytes_of_a_1_2_send() -> None:
    wire = encode_frame("SEND", [("destination", "/queue/a"), ("receipt", "r:1")], b"hello")
    assert wire == b"SEND\ndestination:/queue/a\nreceipt:r\\c1\ncontent-length:5\n\nhello\x00"


def test_no_content_length_for_an_empty_body_or_when_asked() -> None:
    assert encode_frame("ACK", [("id", "7")]) == b"ACK\nid:7\n\n\x00"
    assert encode_frame("SEND", [], b"x", content_length=False) == b"SEND\n\nx\x00"


def test_an_explicit_content_length_is_kept_as_given() -> None:
    wire = encode_frame("SEND", [("content-length", "99")], b"abc")
    assert wire == b"SEND\ncontent-length:99\n\nabc\x00"


def test_crlf_eol() -> None:
    wire = encode_frame("MESSAGE", [("a", "1")], b"b", eol=b"\r\n")
    assert wire == b"MESSAGE\r\na:1\r\ncontent-length:1\r\n\r\nb\x00"


@pytest.mark.parametrize(
    ("version", "value", "escaped"),
    [
        ("1.0", "a:b\\c", "a:b\\c"),
        ("1.1", "a:b\\c\nd", "a\\cb\\\\c\\nd"),
        ("1.2", "a:b\\c\nd\re", "a\\cb\\\\c\\nd\\re"),
    ],
)
def test_escaping_per_version(version: str, value: str, escaped: str) -> None:
    wire = encode_frame("SEND", [("x", value)], version=version)
    assert wire == b"SEND\nx:" + escaped.encode() + b"\n\n\x00"
    assert only_frame(wire, version).get("x") == value


def test_connect_headers_are_not_escaped_in_1_2() -> None:
    assert encode_frame("CONNECT", [("passcode", "a:b\\c")]) == b"CONNECT\npasscode:a:b\\c\n\n\x00"
    assert encode_frame("CONNECTED", [("session", "s:1")], version="1.1") == (
        b"CONNECTED\nsession:s\\c1\n\n\x00"
    )


@pytest.mark.parametrize(
    ("version", "command", "headers", "body"),
    [
        ("1.0", "SEND", [("x", "a\nb")], b""),
        ("1.0", "SEND", [("x:y", "v")], b""),
        ("1.1", "SEND", [("x", "a\rb")], b""),
        ("1.2", "CONNECT", [("x", "a\nb")], b""),
        ("1.2", "SEND", [], b"nul\x00inside"),
        ("2.0", "SEND", [], b""),
    ],
)
def test_what_a_version_cannot_carry_is_refused(
    version: str, command: str, headers: list[tuple[str, str]], body: bytes
) -> None:
    with pytest.raises(ValueError):
        encode_frame(command, headers, body, version=version, content_length=False)


def test_bad_eol_is_refused() -> None:
    with pytest.raises(ValueError):
        encode_frame("SEND", eol=b"\r")
    with pytest.raises(ValueError):
        encode_heartbeat(b"x")


def test_heartbeat() -> None:
    assert encode_heartbeat() == b"\n"
    assert encode_heartbeat(b"\r\n") == b"\r\n"


def test_escape_round_trips_backslash_runs() -> None:
    assert escape("\\\\c", "1.2") == "\\\\\\\\c"
