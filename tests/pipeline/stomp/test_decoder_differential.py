"""Differential tests: on valid traffic, pipeline.stomp decodes what stomp.py 9 decodes with its
own read loop and ``parse_frame`` (command, first-wins headers, body)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from stomp.protocol import Protocol12
from stomp.utils import Frame as StompPyFrame
from stomp.utils import convert_frame

from benchmarks.bench_decoder import generate_traffic, stomppy_frames
from pipeline.stomp import ALL_COMMANDS, BODY_COMMANDS, encode_frame
from tests.pipeline.stomp.stomp_streams import decode, frames

# stomp.py unescapes every frame; STOMP 1.2 leaves CONNECT/CONNECTED alone, so those differ.
COMMANDS = sorted(ALL_COMMANDS - {"CONNECT", "CONNECTED", "STOMP"})
NAMES = st.text(alphabet="abcdefghij-_0123456789", min_size=1, max_size=10).filter(
    lambda name: name != "content-length"
)
VALUES = st.text(alphabet=st.sampled_from("az09 -_/:\\\n\ré€😀"), max_size=16)


def ours(wire: bytes) -> list[tuple[str, dict[str, str], bytes]]:
    return [(f.command, f.headers, f.body) for f in frames(decode(wire, "1.2"))]


def theirs(wire: bytes, chunk: int = 65536) -> list[tuple[str, dict[str, str], bytes]]:
    return [(f.cmd, f.headers, f.body) for f in stomppy_frames(wire, chunk)]  # type: ignore[attr-defined]


@st.composite
def stomppy_wire(draw: st.DrawFn) -> bytes:
    """Frames as stomp.py itself sends them over STOMP 1.2: its escaping, sorted headers,
    content-length for bodies."""
    wire = b""
    for _ in range(draw(st.integers(1, 5))):
        command = draw(st.sampled_from(COMMANDS))
        headers = draw(st.dictionaries(NAMES, VALUES, max_size=6))
        body = draw(st.binary(max_size=30)) if command in BODY_COMMANDS else b""
        Protocol12._escape_headers(None, headers)
        if body:
            headers["content-length"] = str(len(body))
        wire += b"".join(convert_frame(StompPyFrame(command, headers, body)))
        wire += draw(st.sampled_from([b"", b"\n"]))
    return wire


@st.composite
def our_wire(draw: st.DrawFn) -> bytes:
    """Frames from our encoder: repeated headers, LF or CRLF, bodies with or without length."""
    wire = b""
    for _ in range(draw(st.integers(1, 5))):
        command = draw(st.sampled_from(COMMANDS))
        headers = draw(st.lists(st.tuples(NAMES, VALUES), max_size=6))
        body = draw(st.binary(max_size=30)) if command in BODY_COMMANDS else b""
        with_length = b"\x00" in body or draw(st.booleans())
        eol = draw(st.sampled_from([b"\n", b"\r\n"]))
        wire += encode_frame(command, headers, body, content_length=with_length, eol=eol)
        wire += draw(st.sampled_from([b"", b"\n", b"\r\n"]))
    return wire


SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@SETTINGS
@given(wire=stomppy_wire())
def test_frames_stomppy_sends_decode_as_stomppy_decodes_them(wire: bytes) -> None:
    expected = theirs(wire)
    assert expected  # the comparison is not vacuous
    assert ours(wire) == expected


@SETTINGS
@given(wire=our_wire(), chunk=st.integers(min_value=1, max_value=64))
def test_frames_we_encode_decode_as_stomppy_decodes_them(wire: bytes, chunk: int) -> None:
    assert ours(wire) == theirs(wire, chunk)


def test_broker_like_traffic_decodes_as_stomppy_decodes_it() -> None:
    traffic = generate_traffic(0.3)
    expected = theirs(traffic.data)
    assert len(expected) == traffic.frames
    assert ours(traffic.data) == expected
