"""Property tests: chunking never changes what the decoder emits, valid frames round-trip, and
arbitrary bytes never make it raise."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.stomp import (
    ALL_COMMANDS,
    BODY_COMMANDS,
    Decoder,
    Frame,
    HeartBeat,
    Limits,
    Violation,
    encode_frame,
)
from pipeline.stomp.violations import ALL_KINDS
from tests.pipeline.stomp.stomp_streams import decode, frames, pull

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

HEADER_TEXT = st.text(
    alphabet=st.sampled_from("abcXYZ09-_ :\\\n\r\té€😀"), min_size=0, max_size=12
)
HEADER_NAME = HEADER_TEXT.filter(lambda name: name != "content-length" and name != "")


@st.composite
def frame_specs(draw: st.DrawFn, version: str) -> tuple[str, list[tuple[str, str]], bytes]:
    unescaped = {"CONNECT", "CONNECTED", "STOMP"}
    not_in_version = {"NACK"} if version == "1.0" else set()
    command = draw(st.sampled_from(sorted(ALL_COMMANDS - unescaped - not_in_version)))
    if version == "1.0":  # no escapes in 1.0: names and values must not need them
        text = st.text(alphabet=st.sampled_from("abc09-_/ é:"), max_size=10)
        names = text.filter(lambda name: ":" not in name and name not in ("", "content-length"))
        headers = draw(st.lists(st.tuples(names, text), max_size=6))
    else:
        values = HEADER_TEXT if version == "1.2" else HEADER_TEXT.map(lambda t: t.replace("\r", ""))
        names = HEADER_NAME if version == "1.2" else HEADER_NAME.map(lambda t: t.replace("\r", ""))
        headers = draw(st.lists(st.tuples(names.filter(bool), values), max_size=6))
    body = draw(st.binary(max_size=40)) if command in BODY_COMMANDS else b""
    return command, headers, body


@st.composite
def valid_streams(draw: st.DrawFn) -> tuple[str, bytes, list[tuple[str, list, bytes]]]:
    version = draw(st.sampled_from(["1.0", "1.1", "1.2"]))
    specs = draw(st.lists(frame_specs(version), min_size=1, max_size=6))
    wire = b""
    for command, headers, body in specs:
        wire += draw(st.sampled_from([b"", b"\n", b"\n\n"]))  # heart-beats / trailing EOLs
        eol = draw(st.sampled_from([b"\n", b"\r\n"])) if version == "1.2" else b"\n"
        with_length = b"\x00" in body or draw(st.booleans())
        wire += encode_frame(
            command, headers, body, version=version, content_length=with_length, eol=eol
        )
    return version, wire, specs


def chunk_sizes(data: bytes) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(min_value=1, max_value=max(1, len(data))), max_size=len(data))


@settings(SETTINGS, max_examples=100)
@given(stream=valid_streams(), data=st.data())
def test_valid_frames_round_trip_under_any_chunking(stream, data) -> None:
    version, wire, specs = stream
    whole = decode(wire, version)
    assert [(f.command, f.header_list, f.body) for f in frames(whole)] == [
        (command, _with_length(headers, body, f), body)
        for (command, headers, body), f in zip(specs, frames(whole), strict=True)
    ]
    assert all(f.violations == () for f in frames(whole))
    assert not [event for event in whole if isinstance(event, Violation)]
    sizes = data.draw(chunk_sizes(wire))
    assert decode(wire, version, chunks=sizes) == whole
    assert decode(wire, version, chunks=[1] * len(wire)) == whole


def _with_length(headers: list, body: bytes, frame: Frame) -> list:
    if frame.content_length is None:
        return headers
    return [*headers, ("content-length", str(len(body)))]


HEADER_LINES = st.sampled_from(
    [
        b"a:b", b"a\\cb:c\\t", b"content-length:3", b"content-length:x", b"content-length:40",
        b":", b"no-colon", b"\xff\xfe:v", b"a-long-header-name:and-its-value", b"Dest: /q ",
        b"passcode:\\secret",
    ]
)
EOLS = st.sampled_from([b"\n", b"\n", b"\n", b"\r\n"])  # mostly LF: the fast path's case
COMMAND_LINES = st.sampled_from(
    [b"SEND", b"MESSAGE", b"ACK", b"send", b"CONNECT", b"NACK", b"FOO", b"UNSUBSCRIBE-X", b"SEND "]
)
BODIES = st.one_of(
    st.binary(max_size=20), st.sampled_from([b"", b"abc", b"body\x00x", b"one\n\ntwo"])
)


@st.composite
def frame_like(draw: st.DrawFn) -> bytes:
    """Frame-shaped bytes, often broken: the decoder's decisions happen at these seams."""
    parts = [draw(st.sampled_from([b"", b"\n", b"\r\n", b"\x00", b"\x00\x00", b"\r"]))]
    parts.append(draw(COMMAND_LINES) + draw(EOLS))
    parts += [line + draw(EOLS) for line in draw(st.lists(HEADER_LINES, max_size=5))]
    if draw(st.integers(0, 4)):
        parts.append(draw(EOLS))
    parts.append(draw(BODIES))
    if draw(st.integers(0, 4)):
        parts.append(b"\x00")
    return b"".join(parts)


ARBITRARY = st.one_of(
    st.binary(max_size=200),
    st.lists(frame_like(), max_size=6).map(b"".join),
    st.lists(frame_like(), max_size=6).map(b"".join),
)
SMALL_LIMITS = Limits(max_command=8, max_header_line=12, max_headers=3, max_body=16)


@SETTINGS
@given(
    wire=ARBITRARY,
    version=st.sampled_from(["1.0", "1.1", "1.2"]),
    lenient=st.booleans(),
    resync=st.booleans(),
    small=st.booleans(),
    data=st.data(),
)
def test_any_bytes_decode_the_same_under_any_chunking(
    wire, version, lenient, resync, small, data
) -> None:
    options = {"lenient": lenient, "resync": resync, "limits": SMALL_LIMITS if small else None}
    whole = decode(wire, version, **options)
    sizes = data.draw(chunk_sizes(wire))
    assert decode(wire, version, chunks=sizes, **options) == whole
    assert decode(wire, version, chunks=[1] * len(wire), **options) == whole
    _check_accounting(whole, len(wire))


def _check_accounting(events: list, size: int) -> None:
    """Known violation kinds only, never quoting the passcode; frames and beats in order, inside
    the stream, not overlapping."""
    cursor = 0
    for event in events:
        found = [event] if isinstance(event, Violation) else []
        if isinstance(event, HeartBeat):
            assert event.offset >= cursor
            cursor = event.offset + event.length
        elif isinstance(event, Frame):
            assert event.start >= cursor and event.end <= size
            cursor = event.end
            found = list(event.violations)
        for violation in found:
            assert violation.kind in ALL_KINDS
            assert 0 <= violation.offset <= size
            assert "secret" not in violation.detail


@SETTINGS
@given(wire=ARBITRARY, cut=st.integers(min_value=0, max_value=200), data=st.data())
def test_a_pickled_decoder_resumes_where_it_stopped(wire, cut, data) -> None:
    cut = min(cut, len(wire))
    version = data.draw(st.sampled_from(["1.0", "1.2"]))
    straight = decode(wire, version)
    decoder = Decoder(version)
    decoder.feed(wire[:cut])
    before = pull(decoder)
    revived = pickle.loads(pickle.dumps(decoder))
    revived.feed(wire[cut:])
    after = pull(revived)
    revived.feed_eof()
    assert before + after + pull(revived) == straight


@SETTINGS
@given(wire=ARBITRARY, version=st.sampled_from(["1.0", "1.1", "1.2"]))
def test_events_and_next_event_agree(wire, version) -> None:
    decoder = Decoder(version)
    decoder.feed(wire)
    batch = decoder.events()
    decoder.feed_eof()
    batch += decoder.events()
    assert batch == decode(wire, version)


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    wire=st.lists(frame_like(), min_size=1, max_size=6).map(b"".join),
    version=st.sampled_from(["1.0", "1.1", "1.2"]),
)
def test_fast_path_agrees_with_the_state_machine(wire, version) -> None:
    # Whole-stream feeding takes the fast path for clean frames; byte-by-byte feeding never can
    # (a frame is never whole in the buffer), so every frame goes through the state machine.
    assert decode(wire, version) == decode(wire, version, chunks=[1] * len(wire))


HEADER_BLOCKS = st.lists(
    st.one_of(
        HEADER_LINES,
        st.binary(max_size=12),
        st.text(alphabet=st.sampled_from("ab:\\ncré€"), max_size=12).map(str.encode),
    ),
    min_size=1,
    max_size=5,
).map(b"\n".join)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    wire=ARBITRARY,
    raw=HEADER_BLOCKS,
    version=st.sampled_from(["1.0", "1.1", "1.2"]),
    command=st.sampled_from(["SEND", "CONNECT"]),
)
def test_compiled_and_python_agree(
    wire, raw, version, command, backend, compiled_speedups, monkeypatch
) -> None:
    if backend == "python":
        pytest.skip("the compiled run compares both backends")
    from pipeline.stomp import speedups
    from pipeline.stomp.headers import decode_header_block

    compiled = (decode(wire, version), decode_header_block(raw, 3, version, command, False))
    monkeypatch.setattr(speedups, "compiled", None)
    python = (decode(wire, version), decode_header_block(raw, 3, version, command, False))
    assert compiled == python
