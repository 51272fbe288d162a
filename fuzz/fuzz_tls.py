"""Fuzz the TLS record layer (pipeline/tls): any bytes, any segmentation, wrong keys.

Input layout: byte 0 picks the options (gaps, one direction only), byte 1 seeds the chunk sizes,
then a key log's text up to the first blank line, then the connection's bytes as records of
(direction byte, length u16, bytes) in the order they crossed.

Checked for every input: nothing raises (the key log's parser included); a direction holds at
most one record and a hello's body; plaintext tiles each direction's plaintext stream from 0, at
TCP offsets inside what was fed; anomalies and reasons are known kinds; feeding the bytes whole
or in chunks gives the same plaintext, anomalies and facts, and so do the chunks as runs opened
in bulk (`TlsSession.open_run`, compiled or pure) past the handshake; no secret of the key log
shows in an anomaly.
"""

from __future__ import annotations

import random
import struct
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from hypothesis import strategies as st

from fuzz import harness
from pipeline.net import Direction
from pipeline.tls import bulk
from pipeline.tls import session as tls
from pipeline.tls.handshake import MAX_KEPT_BODY
from pipeline.tls.keylog import KeyLog
from pipeline.tls.records import HEADER_LENGTH, MAX_FRAGMENT
from pipeline.tls.session import Plaintext, TlsAnomaly, TlsSession

KINDS = frozenset(
    {tls.TLS_BAD_RECORD, tls.TLS_NOT_TLS, tls.TLS_GAP, tls.TLS_BAD_HANDSHAKE, tls.TLS_NO_KEYS}
)
REASONS = frozenset(
    {None, tls.NO_KEYS, tls.UNSUPPORTED_CIPHER, tls.BAD_RECORD_MAC, tls.HANDSHAKE_NOT_SEEN}
)
MAX_LEN = 1 << 15


def parse(data: bytes) -> tuple[int, int, str, list[tuple[Direction, bytes]]]:
    flags = data[0] if data else 0
    seed = data[1] if len(data) > 1 else 0
    keylog, _, wire_bytes = data[2:].partition(b"\n\n")
    wire: list[tuple[Direction, bytes]] = []
    at = 0
    while at + 3 <= len(wire_bytes):
        direction = Direction.C2S if wire_bytes[at] & 1 else Direction.S2C
        (length,) = struct.unpack_from("!H", wire_bytes, at + 1)
        wire.append((direction, wire_bytes[at + 3 : at + 3 + length]))
        at += 3 + length
    return flags, seed, keylog.decode("ascii", "replace"), wire


def serialize(keylog: str, wire: list[tuple[Direction, bytes]], flags: int = 0) -> bytes:
    out = bytearray([flags, 0]) + keylog.strip().encode() + b"\n\n"
    for direction, data in wire:
        for start in range(0, len(data), 0xFFFF):
            piece = data[start : start + 0xFFFF]
            out += bytes([direction is Direction.C2S]) + struct.pack("!H", len(piece)) + piece
    return bytes(out)


def pieces(data: bytes, rng: random.Random) -> Iterator[bytes]:
    at = 0
    while at < len(data):
        size = rng.randint(1, rng.choice((1, 5, 64, 4096)))
        yield data[at : at + size]
        at += size


def opened_in_bulk(
    session: TlsSession, direction: Direction, tcp_offset: int, chunks: list[bytes]
) -> list[object]:
    """The chunks as one run, as `TlsTransport.receive_run` feeds them: opened in bulk, then
    the record that stopped the run and the chunks after it the record-by-record way."""
    sizes = [len(chunk) for chunk in chunks]
    plain_starts: list[int] = []
    tcp_starts: list[int] = []
    start, plaintext, plain_sizes, taken = session.open_run(
        direction, b"".join(chunks), sizes, [0] * len(sizes), plain_starts, tcp_starts
    )
    assert sum(plain_sizes) == len(plaintext) and taken <= len(sizes)
    assert len(plain_sizes) == min(taken + 1, len(sizes))
    assert plain_starts == sorted(plain_starts) and len(plain_starts) == len(tcp_starts)
    events: list[object] = []
    if plaintext:
        events.append(Plaintext(direction, 0, start, tcp_starts[0], plaintext))
    if taken < len(sizes):
        at = tcp_offset + sum(sizes[: taken + 1])
        events += session.receive(direction, 0, at, b"")
        for chunk in chunks[taken + 1 :]:
            events += session.receive(direction, 0, at, chunk)
            at += len(chunk)
    return events


def feed(
    keys: KeyLog,
    wire: list[tuple[Direction, bytes]],
    flags: int,
    seed: int,
    *,
    chunked: bool,
    bulk: Callable[..., tuple[bytes, list[int], int, int]] | None = None,
) -> tuple[dict[Direction, bytes], list[tuple[str, int]], tuple[object, ...]]:
    """``bulk``: the runs' opener (`open_bulk`'s choice, or the reference), to feed each
    direction's chunks as runs opened in bulk past the handshake."""
    session = TlsSession(keys.get)
    if bulk is not None:
        session._bulk = bulk  # noqa: SLF001 - which twin opens the runs is the point
    rng = random.Random(seed)
    offsets = {Direction.C2S: 0, Direction.S2C: 0}
    plain = {Direction.C2S: bytearray(), Direction.S2C: bytearray()}
    anomalies: list[tuple[str, int]] = []
    for direction, data in wire:
        if flags & 2 and direction is Direction.S2C and offsets[direction] > 0:
            continue  # one direction only after the first chunk: replies lost
        events: list[object] = []
        if flags & 1 and rng.random() < 0.05:
            events += session.receive_gap(direction, 0, offsets[direction], 7)
            offsets[direction] += 7
        chunks = list(pieces(data, rng)) if chunked or bulk else [data]
        if bulk and chunks and session.takes_run(direction):
            events += opened_in_bulk(session, direction, offsets[direction], chunks)
            offsets[direction] += len(data)
            chunks = []
        for chunk in chunks:
            events += session.receive(direction, 0, offsets[direction], chunk)
            offsets[direction] += len(chunk)
            side = session._sides[direction]  # noqa: SLF001 - the bounds are the point
            assert side.reader.held < HEADER_LENGTH + MAX_FRAGMENT
            body = side.framer._body  # noqa: SLF001
            assert body is None or len(body) <= MAX_KEPT_BODY
        for event in events:
            if isinstance(event, Plaintext):
                assert event.offset == len(plain[direction]) and event.data
                assert 0 <= event.tcp_offset < offsets[direction]
                plain[direction] += event.data
            else:
                assert isinstance(event, TlsAnomaly) and event.kind in KINDS, event
                assert 0 <= event.tcp_offset <= offsets[direction]
                anomalies.append((event.kind, event.tcp_offset))
    facts = session.finish()
    assert facts.not_decrypted_reason in REASONS
    assert facts.decrypted == (facts.not_decrypted_reason is None)
    summary = (facts.version, facts.cipher_suite, facts.decrypted, facts.not_decrypted_reason)
    return {d: bytes(b) for d, b in plain.items()}, anomalies, summary


def check(data: bytes) -> None:
    flags, seed, text, wire = parse(data[:MAX_LEN])
    keys = KeyLog()
    keys.add_lines(text.splitlines())
    whole = feed(keys, wire, flags, seed, chunked=False)
    chunked = feed(keys, wire, flags, seed, chunked=True)
    in_bulk = feed(keys, wire, flags, seed, chunked=True, bulk=tls.open_bulk())
    reference = feed(keys, wire, flags, seed, chunked=True, bulk=bulk.open_records)
    if not flags & 1:  # gaps fall where the chunks do
        assert whole == chunked, "chunking changed what was decrypted"
    assert in_bulk[0] == chunked[0] and in_bulk[2] == chunked[2], "bulk opening changed it"
    assert in_bulk == reference, "the compiled bulk opener differs from its reference"
    secrets = [s.hex() for one in keys.secrets.values() for s in vars_of(one) if s]
    shown = repr(whole[1]) + repr(keys)
    assert not any(s in shown for s in secrets)


def vars_of(secrets: object) -> list[bytes | None]:
    return [getattr(secrets, name) for name in secrets.__slots__]  # type: ignore[attr-defined]


def seeds() -> list[bytes]:
    from tests.support.tls_pair import converse

    exchanges = [
        (Direction.C2S, b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00"),
        (Direction.S2C, b"CONNECTED\nversion:1.2\n\n\x00\n"),
        (Direction.C2S, b"SEND\ndestination:/q\n\n" + b"x" * 20_000 + b"\x00"),
    ]
    out = []
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        for options in (
            {},
            {"tls13_suite": "TLS_CHACHA20_POLY1305_SHA256"},
            {"tls12_cipher": "ECDHE-RSA-AES128-GCM-SHA256"},
            {"tls12_cipher": "ECDHE-RSA-AES128-SHA", "encrypt_then_mac": False},
        ):
            talk = converse(folder, exchanges=exchanges, **options)
            out.append(serialize(talk.keylog, talk.wire))
            out.append(serialize("", talk.wire, flags=2))
    return out


def strategy() -> st.SearchStrategy[bytes]:
    return st.one_of(harness.mutated(seeds()), st.binary(max_size=2048))


if __name__ == "__main__":
    sys.exit(harness.main(sys.modules[__name__]))
