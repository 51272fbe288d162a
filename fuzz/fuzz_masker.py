"""Fuzz the capture proxy's passcode masker (`capture.masking`): any bytes, any chunking.

Input layout: byte 0 seeds the chunk sizes, the rest is a client's byte stream.

Checked for every input: nothing raises; each chunk comes back as one piece with its own time
and length, changed only where a byte became ``*`` (line ends stay where they were); feeding it
in chunks gives what feeding it whole gives, except that a CR ending a chunk inside a passcode
value is masked too; and the masked stream, decoded as a broker would (the STOMP decoder, each
version, lenient), has no CONNECT or STOMP frame whose passcode header shows anything but ``*``.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator

import numpy as np
from hypothesis import strategies as st

from capture.masking import FILLER, PasscodeMasker
from fuzz import harness
from fuzz.seeds import EDGE_STREAMS, PASSCODE, stomp_streams
from pipeline.stomp import NEED_DATA, Decoder, Frame, Violation

MAX_LEN = 1 << 13
CR, LF = 0x0D, 0x0A


def mask(stream: bytes, sizes: list[int]) -> bytes:
    masker = PasscodeMasker()
    out = bytearray()
    at = 0
    for number, size in enumerate(sizes):
        chunk = stream[at : at + size]
        pieces = masker.feed(number, chunk)
        assert len(pieces) == 1 and pieces[0][0] == number, pieces
        masked = pieces[0][1]
        assert len(masked) == len(chunk), "a chunk changed length"
        out += masked
        at += size
    assert at >= len(stream) and not masker.flush()
    return bytes(out)


def chunk_sizes(stream: bytes, seed: int) -> list[int]:
    rng = random.Random(seed)
    sizes, left = [], len(stream)
    while left > 0:
        size = min(left, rng.randint(1, rng.choice((1, 7, 64, 1500))))
        sizes.append(size)
        left -= size
    return sizes


def differences(one: bytes, other: bytes) -> Iterator[tuple[int, int, int]]:
    """(offset, byte of one, byte of other) where two streams of one length differ; compared
    in numpy, as most inputs differ in a few bytes or none."""
    assert len(one) == len(other), (len(one), len(other))
    left, right = np.frombuffer(one, np.uint8), np.frombuffer(other, np.uint8)
    for at in np.flatnonzero(left != right).tolist():
        yield at, one[at], other[at]


def check_unmasked_passcodes(masked: bytes) -> None:
    for version in ("1.0", "1.1", "1.2"):
        decoder = Decoder(version, lenient=True)
        decoder.feed(masked)
        decoder.feed_eof()
        clean = True  # until the stream's framing went wrong, frames are framed as brokers do
        while (event := decoder.next_event()) is not NEED_DATA:
            if type(event) is Violation:
                clean = False
            elif type(event) is Frame and clean and not event.violations:
                if not event.command.strip().upper().startswith(("CONNECT", "STOMP")):
                    continue
                for name, value in event.header_list:
                    if "passcode" in name.lower():
                        assert not value.strip("*\r"), f"{version}: passcode shown: {value!r}"


def check(data: bytes) -> None:
    seed, stream = (data[0] if data else 0), data[1:]
    whole = mask(stream, [len(stream)] if stream else [])
    for at, before, after in differences(stream, whole):
        assert after == FILLER and before != LF, (at, before, after)
    chunked = mask(stream, chunk_sizes(stream, seed))
    for at, one, other in differences(whole, chunked):
        # a CR ending a chunk inside a passcode value is masked: it may belong to the value
        assert one == CR and other == FILLER, (at, one, other)
    check_unmasked_passcodes(whole)
    check_unmasked_passcodes(chunked)


def seeds() -> list[bytes]:
    logins = [
        b"CONNECT\naccept-version:1.2\nhost:/\nlogin:guest\npasscode:%s\n\n\x00",
        b"STOMP\r\npasscode:%s\r\nlogin:a\r\n\r\n\x00\n",
        b"\n\nconnect \nPassCode:%s\ncontent-length:0\n\n\x00",
        b"SEND\ndestination:/q\ncontent-length:9\n\npasscode:\x00CONNECT\npass\\ccode:%s\n\n\x00",
        b"CONNECT\np a s s c o d e:%s\npasscode:%s:%s\n\n\x00",
    ]
    secret = PASSCODE.encode()
    out = [bytes([n]) + login.replace(b"%s", secret) for n, login in enumerate(logins)]
    client = [s for s in stomp_streams() if s.startswith((b"CONNECT", b"STOMP"))]
    out += [bytes([n]) + stream[: MAX_LEN - 1] for n, stream in enumerate(client)]
    out += [bytes([n]) + stream for n, stream in enumerate(EDGE_STREAMS)]
    return out


PARTS = st.sampled_from(
    [
        b"CONNECT\n",
        b"STOMP\r\n",
        b"SEND\n",
        b"passcode:" + PASSCODE.encode() + b"\n",
        b"PASSCODE :x\r\n",
        b"pass\\ccode:y\n",
        b"content-length:4\n",
        b"content-length:x\n",
        b"login:a\n",
        b"\n",
        b"\r\n",
        b"\x00",
        b"abc",
        b"\\",
        b":",
    ]
)


def strategy() -> st.SearchStrategy[bytes]:
    structured = st.lists(PARTS, max_size=30).map(b"".join)
    stream = st.one_of(harness.mutated([s[1:] for s in seeds()]), structured, st.binary())
    return st.tuples(st.binary(min_size=1, max_size=1), stream).map(b"".join)


if __name__ == "__main__":
    sys.exit(harness.main(sys.modules[__name__]))
