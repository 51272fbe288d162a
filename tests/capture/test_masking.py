from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capture.masking import (
    MAX_COMMAND,
    MAX_LENGTH_DIGITS,
    MAX_REQUEST_LINE,
    PasscodeMasker,
    compact_length_value,
    has_connect_command,
    is_connect_command,
    is_credential_parameter,
    is_passcode_name,
)

CONNECT = (
    b"\r\nCONNECT\r\naccept-version:1.0,1.1,1.2\r\nhost:/\r\nlogin:guest\r\n"
    b"passcode:s3cr\\ct\r\nheart-beat:0,0\r\n\r\n\0"
)
SEND = b"SEND\ndestination:/queue/a\npasscode:not-a-header-to-mask\n\nbody passcode:x\0"


def _run(masker: PasscodeMasker, chunks: list[bytes]) -> list[tuple[int, bytes]]:
    out = []
    for ts, chunk in enumerate(chunks):
        out += masker.feed(ts, chunk)
    return out + masker.flush()


def _masked(stream: bytes, chunk: int | None = None) -> bytes:
    chunks = (
        [stream] if chunk is None else [stream[i : i + chunk] for i in range(0, len(stream), chunk)]
    )
    out = _run(PasscodeMasker(), chunks)
    assert [len(data) for _, data in out] == [len(c) for c in chunks]
    return b"".join(data for _, data in out)


def _masked_as(masked: bytes, expected: bytes) -> bool:
    """Equal, but where a CR that ended a chunk right after a passcode value was masked too (it
    might be part of the value)."""
    return len(masked) == len(expected) and all(
        a == b or (b, a) == (0x0D, 0x2A) for a, b in zip(masked, expected, strict=True)
    )


def test_the_connect_frame_is_masked_and_the_rest_passes() -> None:
    out = _run(PasscodeMasker(), [CONNECT + SEND])
    expected = CONNECT.replace(b"s3cr\\ct", b"*******") + SEND
    assert out == [(0, expected)]


def test_a_second_connect_on_the_same_connection_is_masked_too() -> None:
    stream = CONNECT + SEND + b"\n\n" + CONNECT.replace(b"CONNECT", b"STOMP") + SEND
    assert _masked(stream) == stream.replace(b"s3cr\\ct", b"*******")


def test_a_passcode_after_64_kib_of_headers_is_masked_without_holding_anything() -> None:
    pad = b"".join(b"x-pad-%05d:%s\n" % (i, b"p" * 100) for i in range(700))
    frame = b"CONNECT\nlogin:a\n" + pad + b"passcode:late-secret\n\n\0"
    assert len(pad) > 64 << 10
    for chunk in (1000, 7):  # each chunk comes back at once, its length kept (in _masked)
        assert b"secret" not in _masked(frame, chunk)
    assert _masked(frame) == frame.replace(b"late-secret", b"*" * 11)


@pytest.mark.parametrize(
    "line",
    [
        b"passcode:v",
        b"PASSCODE:v",
        b"Passcode:v",
        b"passcode :v",
        b" passcode:v",
        b"\tpasscode\t:v",
        b"pass code:v",
        b"p\\assc\\ode:v",
        b"x-passcode:v",
        b"passcode\\c:v",
        b"passcode:v:w",
    ],
)
def test_header_names_a_broker_could_read_as_passcode(line: bytes) -> None:
    frame = b"CONNECT\nlogin:a\n" + line + b"\n\n\0"
    value = line.split(b":", 1)[1]
    assert _masked(frame) == frame.replace(b":" + value + b"\n", b":" + b"*" * len(value) + b"\n")


@pytest.mark.parametrize("command", [b"CONNECT", b"STOMP", b"connect", b" CONNECT ", b"STOMPX"])
def test_commands_a_broker_could_read_as_connect(command: bytes) -> None:
    assert is_connect_command(command)
    frame = command + b"\r\npasscode:abc\r\n\r\n\0"
    assert _masked(frame) == frame.replace(b"abc", b"***")


def test_names_and_commands_that_are_not_passcode_or_connect() -> None:
    assert not is_passcode_name(b"login") and not is_passcode_name(b"pass")
    assert not is_connect_command(b"SEND") and not is_connect_command(b"DISCONNECT")


def test_bodies_are_skipped_by_content_length_or_nul() -> None:
    body = b"CONNECT\npasscode:in-a-body\n\n"
    send = b"SEND\ndestination:/q\ncontent-length:%d\n\n%s\0" % (len(body) + 1, body + b"\0")
    no_length = b"SEND\ndestination:/q\n\n" + body.replace(b"CONNECT", b"c") + b"\0"
    stream = send + no_length + CONNECT
    assert _masked(stream) == stream.replace(b"s3cr\\ct", b"*******")
    assert _masked(stream, 7) == stream.replace(b"s3cr\\ct", b"*******")


def test_a_wrong_content_length_falls_back_to_the_nul() -> None:
    stream = b"SEND\ncontent-length:2\n\nabcdef\0" + CONNECT
    assert _masked(stream) == stream.replace(b"s3cr\\ct", b"*******")


@pytest.mark.parametrize("chunk", [None, 1, 5, 16, 40])
def test_a_long_content_length_frames_the_stream_however_it_is_cut(chunk: int | None) -> None:
    # not a byte count (digits then letters): the body ends at the NUL, and the CONNECT that
    # follows is masked, whether or not a chunk ended after the first 32 digits
    bad = b"SEND\ncontent-length:" + b"0" * 20 + b"15592874560432053360CONNEC884p:17\n\n{}\0"
    # a byte count with many leading zeros, as the lake's decoder reads it
    zeros = b"SEND\ncontent-length: " + b"0" * 60 + b"3 \r\n\nab\0\0"
    for stream in (bad + CONNECT, zeros + CONNECT):
        assert _masked_as(_masked(stream, chunk), stream.replace(b"s3cr\\ct", b"*******"))


def test_a_long_content_length_value_keeps_how_it_reads() -> None:
    for text, reads in [
        (b" " + b"0" * 60 + b"12 ", b" 12 "),
        (b"0" * 60, b"0"),
        (b"7" * 40, b"9" * MAX_LENGTH_DIGITS),
        (b"12 3", b"x"),
        (b"1" * 40 + b"a", b"x"),
        (b"\t\t", b"\t"),
    ]:
        assert compact_length_value(text) == reads
        for after in (b"", b"5", b" ", b"x"):
            whole = (text + after).strip()
            kept = (reads + after).strip()
            assert whole.isdigit() == kept.isdigit(), (text, after)


@pytest.mark.parametrize("chunk", [None, 1, 30, MAX_COMMAND])
def test_a_command_after_any_run_of_whitespace_counts_as_connect(chunk: int | None) -> None:
    stream = b" \t" * MAX_COMMAND + CONNECT.lstrip()
    assert _masked_as(_masked(stream, chunk), stream.replace(b"s3cr\\ct", b"*******"))


def test_an_unfinished_connect_is_masked_as_it_comes() -> None:
    cut = CONNECT[:71]
    assert cut.endswith(b"passcode:s3")
    out = _run(PasscodeMasker(), [cut[:40], cut[40:]])
    assert out == [(0, cut[:40]), (1, cut[40:].replace(b"s3", b"**"))]


@pytest.mark.parametrize(
    "before",
    [b"\x01\0", b"SEND\0", b"SEND\nx:y\0", b"SEND\nx\0", b"SEND\ncontent-length:1\0"],
    ids=["command", "after-command", "value", "name", "content-length"],
)
def test_a_nul_before_the_blank_line_ends_the_frame(before: bytes) -> None:
    stream = before + CONNECT
    assert _masked(stream) == stream.replace(b"s3cr\\ct", b"*******")
    assert b"s3" not in _masked(stream, 1)  # a CR ending a chunk in the value is masked too


def test_connect_commands_among_nul_separated_ones() -> None:
    assert has_connect_command(b"\x01\0 connect")
    assert has_connect_command(b"STOMP")
    assert has_connect_command(b"x\0\0\r\nStomp\0y")
    assert not has_connect_command(b"SEND\0xCONNECT\0")
    assert not has_connect_command(b"\0" * 10_000)


def test_the_frame_after_a_nul_that_cut_a_connect_counts_as_connect() -> None:
    # a broker keeping the NUL reads one CONNECT frame; the lake's decoder reads two frames
    for head in (b"CONNECT\nlogin:a\0", b"CONNECT\0", b"CONNECT\nx\0y\0"):
        stream = head + b"z\npasscode:secret\n\n\0"
        assert _masked(stream) == stream.replace(b"secret", b"******")


def test_a_passcode_value_is_masked_to_its_line_end_with_its_nuls_kept() -> None:
    stream = b"CONNECT\npasscode:ab\0secret\r\npasscode:2nd\n\n\0"
    masked = b"CONNECT\npasscode:**\0******\r\npasscode:***\n\n\0"
    assert _masked(stream) == masked
    assert _masked(stream, 1).replace(b"*\n", b"\r\n", 1) == masked  # the CR ended a chunk


def test_a_very_long_header_name_has_its_value_masked() -> None:
    frame = b"CONNECT\n" + b"n" * 2000 + b":value\n\n\0"
    assert _masked(frame, 300) == frame.replace(b"value", b"*****")


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(1, 40), max_size=12))
def test_any_split_gives_the_same_bytes_with_times_kept(cuts: list[int]) -> None:
    stream = CONNECT + SEND + SEND + CONNECT
    chunks, pos = [], 0
    for cut in cuts:
        chunks.append(stream[pos : pos + cut])
        pos += cut
    chunks = [c for c in chunks if c] + ([stream[pos:]] if stream[pos:] else [])
    out = _run(PasscodeMasker(), chunks)
    assert [len(data) for _, data in out] == [len(c) for c in chunks]
    assert [ts for ts, _ in out] == list(range(len(chunks)))
    joined = b"".join(data for _, data in out)
    assert _masked_as(joined, stream.replace(b"s3cr\\ct", b"*******"))


UPGRADE = (
    b"GET /ws?login=guest&passcode=pw-1&Pass%77ord=pw-22&token=t1&token=t2&flag&x=1"
    b"#access_token=t-3&state=s HTTP/1.1\r\nHost: b\r\nUpgrade: websocket\r\n"
    b"Referer: http://a/?passcode=not-the-request-line\r\n\r\n"
)
UPGRADE_MASKED = (
    b"GET /ws?login=guest&passcode=****&Pass%77ord=*****&token=**&token=**&flag&x=1"
    b"#access_token=***&state=s HTTP/1.1\r\nHost: b\r\nUpgrade: websocket\r\n"
    b"Referer: http://a/?passcode=not-the-request-line\r\n\r\n"
)


@pytest.mark.parametrize("chunk", [None, 1, 3, 17])
def test_a_websocket_upgrade_has_its_credential_parameters_masked(chunk: int | None) -> None:
    frames = b"\x81\x85\x00\x00\x00\x00hello"  # WebSocket frames after it: left as they are
    assert _masked(UPGRADE + frames, chunk) == UPGRADE_MASKED + frames
    masker = PasscodeMasker()
    _run(masker, [UPGRADE])
    assert masker.masked == 5


def test_a_request_line_is_looked_into_up_to_its_bound_however_it_is_cut() -> None:
    head = b"GET /ws?token=first&pad="
    pad = b"p" * (MAX_REQUEST_LINE - len(head) - 6)
    stream = head + pad + b"&token=second-one HTTP/1.1\r\n\r\n"
    masked = _masked(stream)
    assert masked.startswith(b"GET /ws?token=*****&pad=") and b"second" in masked
    for chunk in (1000, 4096, 1 << 16):
        assert _masked(stream, chunk) == masked


def test_only_a_stream_that_opens_with_get_has_a_request_target() -> None:
    for stream in (b"GETX /ws?token=t-1 HTTP/1.1\r\n\r\n", b"POST /ws?token=t-1 HTTP/1.1\r\n\r\n"):
        assert _masked(stream, 2) == stream
    assert (
        _masked(CONNECT + b"GET /ws?token=t-1 \n\n\0")
        == CONNECT.replace(b"s3cr\\ct", b"*******") + b"GET /ws?token=t-1 \n\n\0"
    )


def test_credential_parameter_names() -> None:
    for name in (
        b"passcode",
        b"PASSWORD",
        b"pass",
        b"access_token",
        b"Access-Token",
        b"%70ass",
        b"pass+word",
    ):
        assert is_credential_parameter(name), name
    for name in (b"login", b"tokens", b"mytoken", b"x", b""):
        assert not is_credential_parameter(name), name
