from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from capture.masking import HOLD_LIMIT, PasscodeMasker, mask_passcode_lines

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


def test_mask_lines_in_a_frame_head_only() -> None:
    buf = bytearray(b"STOMP\nPASSCODE: abc \npasscode:\nx:passcode:y\n\npasscode:body\0")
    assert mask_passcode_lines(buf) == 2
    assert buf == b"STOMP\nPASSCODE:*****\npasscode:\nx:passcode:y\n\npasscode:body\0"


def test_the_connect_frame_is_masked_and_the_rest_passes() -> None:
    out = _run(PasscodeMasker(), [CONNECT + SEND])
    expected = CONNECT.replace(b"s3cr\\ct", b"*******") + SEND
    assert out == [(0, expected)]


def test_a_frame_other_than_connect_switches_masking_off() -> None:
    out = _run(PasscodeMasker(), [SEND, CONNECT])
    assert b"".join(data for _, data in out) == SEND + CONNECT


def test_an_unfinished_connect_is_masked_at_the_end() -> None:
    cut = CONNECT[:71]
    assert b"passcode:s3" in cut
    out = _run(PasscodeMasker(), [cut[:40], cut[40:]])
    assert out == [(0, cut[:40]), (1, cut[40:].replace(b"s3", b"**"))]


def test_nothing_is_held_beyond_the_limit() -> None:
    masker = PasscodeMasker()
    junk = b"CONNECT\nlogin:a\npasscode:b\n" + b"x-pad:" + b"p" * HOLD_LIMIT
    out = masker.feed(7, junk)
    assert out == [(7, junk.replace(b"passcode:b", b"passcode:*"))]
    assert masker.feed(8, b"passcode:later") == [(8, b"passcode:later")]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(1, 40), max_size=12))
def test_any_split_gives_the_same_bytes_with_times_kept(cuts: list[int]) -> None:
    stream = CONNECT + SEND + SEND
    chunks, pos = [], 0
    for cut in cuts:
        chunks.append(stream[pos : pos + cut])
        pos += cut
    chunks = [c for c in chunks if c] + ([stream[pos:]] if stream[pos:] else [])
    out = _run(PasscodeMasker(), chunks)
    assert [len(data) for _, data in out] == [len(c) for c in chunks]
    assert [ts for ts, _ in out] == list(range(len(chunks)))
    joined = b"".join(data for _, data in out)
    assert joined == stream.replace(b"s3cr\\ct", b"*******")
