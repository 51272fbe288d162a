"""pipeline/tls/bulk.py and its compiled twin pipeline/tls/_bulk.pyx: records of real TLS
conversations (TLS 1.3 and 1.2, GCM, ChaCha20 and CBC), cut into packets at random, opened in
bulk to the same plaintext, offsets, sequence numbers and stopping place by both; damaged
records and handshake messages stop both at the same record."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pipeline.compiled import built
from pipeline.net import Direction
from pipeline.tls import bulk
from pipeline.tls.keylog import KeyLog
from pipeline.tls.session import Plaintext, TlsSession
from tests.support.tls_pair import Conversation, converse

C2S, S2C = Direction.C2S, Direction.S2C
MESSAGE = b"MESSAGE\ndestination:/queue/a\nmessage-id:m-%d\nsubscription:0\n\n" + b"x" * 300 + b"\0"
SUITES = [
    pytest.param({}, id="tls13-aes128-gcm"),
    pytest.param({"tls13_suite": "TLS_CHACHA20_POLY1305_SHA256"}, id="tls13-chacha20"),
    pytest.param({"tls12_cipher": "ECDHE-RSA-AES256-GCM-SHA384"}, id="tls12-aes256-gcm"),
    pytest.param({"tls12_cipher": "ECDHE-RSA-CHACHA20-POLY1305"}, id="tls12-chacha20"),
    pytest.param({"tls12_cipher": "ECDHE-RSA-AES128-SHA256"}, id="tls12-aes128-cbc"),
]
Opener = Callable[..., tuple[bytes, list[int], int, int]]


def compiled_opener() -> Opener:
    kernel = built("tls_bulk")
    if kernel is None:
        pytest.fail("pipeline.tls._bulk is not built (make venv; OpenSSL's headers: libssl-dev)")
    return kernel.open_records


def keyed_session(talk: Conversation) -> tuple[TlsSession, bytes, int]:
    """A session fed the conversation the record-by-record way up to the server's first
    plaintext (past the handshake and the session tickets), the rest of the server's stream,
    and its TCP offset."""
    keys = KeyLog()
    keys.add_lines(talk.keylog.splitlines())
    session = TlsSession(keys.get)
    at = {C2S: 0, S2C: 0}
    wire = list(talk.wire)
    plaintext = False
    while wire and not plaintext:
        direction, data = wire.pop(0)
        events = session.receive(direction, 0, at[direction], data)
        plaintext = direction is S2C and any(isinstance(e, Plaintext) for e in events)
        at[direction] += len(data)
    assert session.takes_run(S2C)
    rest = b"".join(data for direction, data in wire if direction is S2C)
    return session, rest, at[S2C]


def open_with(opener: Opener, session: TlsSession, source: bytes, sizes: list[int], at: int) -> Any:
    cipher = session._sides[S2C].cipher
    assert cipher is not None
    plain_starts: list[int] = []
    tcp_starts: list[int] = []
    opened = opener(cipher, source, 0, sizes, at, 0, plain_starts, tcp_starts)
    return (*opened, plain_starts, tcp_starts, cipher.seq)


def cut(size: int, rng: random.Random) -> list[int]:
    sizes = []
    while size > 0:
        sizes.append(min(size, rng.choice((1, 7, 300, 1460, 4000, 65483))))
        size -= sizes[-1]
    return sizes


def conversation(tmp_path: Path, options: dict[str, Any], messages: int = 40) -> Conversation:
    exchanges = [(C2S, b"CONNECT\naccept-version:1.2\nhost:/\n\n\0")]
    exchanges += [(S2C, b"CONNECTED\nversion:1.2\n\n\0")]
    exchanges += [(S2C, MESSAGE % n) for n in range(messages)]
    return converse(tmp_path, exchanges=exchanges, **options)


@pytest.mark.parametrize("options", SUITES)
def test_compiled_and_pure_open_the_same_records_however_cut(
    tmp_path: Path, options: dict[str, str]
) -> None:
    talk = conversation(tmp_path, options)
    expected = b"CONNECTED\nversion:1.2\n\n\0" + b"".join(MESSAGE % n for n in range(40))
    for seed in range(20):
        rng = random.Random(seed)
        results = []
        for opener in (bulk.open_records, compiled_opener()):
            session, rest, at = keyed_session(talk)
            sizes = cut(len(rest), rng)
            rng.seed(seed)
            results.append(open_with(opener, session, rest, sizes, at))
        assert results[0] == results[1], seed
        plaintext, plain_sizes, taken, consumed, plain_starts, tcp_starts, _ = results[0]
        assert sum(plain_sizes) == len(plaintext) and taken <= len(sizes)
        assert plaintext in expected and len(plaintext) > 30 * len(MESSAGE % 0)  # to the alert
        assert consumed <= len(rest)
        assert all(rest[t - at] == 23 for t in tcp_starts)
        assert plain_starts == sorted(plain_starts) and len(plain_starts) == len(tcp_starts)


@pytest.mark.parametrize("options", SUITES)
def test_a_damaged_record_stops_both_before_it(tmp_path: Path, options: dict[str, str]) -> None:
    talk = conversation(tmp_path, options, messages=6)
    results = []
    for opener in (bulk.open_records, compiled_opener()):
        session, rest, at = keyed_session(talk)
        damaged = bytearray(rest)
        damaged[len(rest) // 2] ^= 0x40  # inside a record in the middle
        results.append(open_with(opener, session, bytes(damaged), [len(rest)], at))
    assert results[0] == results[1]
    _, _, taken, consumed, _, _, _ = results[0]
    assert taken == 0 and consumed <= len(rest) // 2 < len(rest)


def test_what_is_not_application_data_stops_both_where_it_starts(tmp_path: Path) -> None:
    """TLS 1.3 servers send their session tickets after the handshake: handshake messages inside
    application-data records, left to the record-by-record path with the sequence number
    unmoved."""
    talk = conversation(tmp_path, {}, messages=3)
    keys = KeyLog()
    keys.add_lines(talk.keylog.splitlines())
    results = []
    for opener in (bulk.open_records, compiled_opener()):
        session = TlsSession(keys.get)
        at = {C2S: 0, S2C: 0}
        for direction, data in talk.wire:
            if direction is S2C and session.takes_run(S2C):
                cipher = session._sides[S2C].cipher
                assert cipher is not None
                seq = cipher.seq
                opened = opener(cipher, data, 0, [len(data)], at[S2C], 0, [], [])
                results.append((opened, seq, cipher.seq))
                break
            session.receive(direction, 0, at[direction], data)
            at[direction] += len(data)
    assert results[0] == results[1]
    (plaintext, _, taken, consumed), seq_before, seq_after = results[0]
    assert plaintext == b"" and taken == 0 and consumed == 0 and seq_before == seq_after
