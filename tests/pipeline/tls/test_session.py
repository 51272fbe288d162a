"""pipeline/tls/session.py: real TLS conversations (OpenSSL on both sides, in memory) decrypted
from their bytes and the client's key log, as a passive capture would hold them."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.net import Direction
from pipeline.tls.keylog import KeyLog
from pipeline.tls.session import (
    BAD_RECORD_MAC,
    HANDSHAKE_NOT_SEEN,
    NO_KEYS,
    TLS_BAD_RECORD,
    TLS_GAP,
    TLS_NO_KEYS,
    TLS_NOT_TLS,
    Plaintext,
    TlsAnomaly,
    TlsSession,
)
from tests.support.tls_pair import Conversation, converse

C2S, S2C = Direction.C2S, Direction.S2C
CONNECT = b"CONNECT\naccept-version:1.2\nhost:/\nlogin:app\npasscode:secret\n\n\x00"
CONNECTED = b"CONNECTED\nversion:1.2\nheart-beat:0,0\n\n\x00\n"
SEND = b"SEND\ndestination:/queue/a\ncontent-length:5\n\nhello\x00"
EXCHANGES = [(C2S, CONNECT), (S2C, CONNECTED), (C2S, SEND), (C2S, b"\n"), (S2C, b"\n")]


def keylog_of(talk: Conversation) -> KeyLog:
    keylog = KeyLog()
    keylog.add_lines(talk.keylog.splitlines())
    return keylog


def replay(
    talk: Conversation, keylog: KeyLog | None = None, *, skip: int = 0
) -> tuple[TlsSession, dict[Direction, bytes], list[TlsAnomaly]]:
    """The conversation's bytes fed as reassembly hands them over, from the `skip`-th chunk."""
    keys = keylog if keylog is not None else keylog_of(talk)
    session = TlsSession(keys.get)
    offsets = {C2S: 0, S2C: 0}
    plain: dict[Direction, bytearray] = {C2S: bytearray(), S2C: bytearray()}
    anomalies: list[TlsAnomaly] = []
    for number, (direction, data) in enumerate(talk.wire):
        if number >= skip:
            for event in session.receive(direction, number, offsets[direction], data):
                if isinstance(event, Plaintext):
                    assert event.offset == len(plain[direction])
                    plain[direction] += event.data
                else:
                    anomalies.append(event)
        offsets[direction] += len(data)
    session.finish()
    return session, {d: bytes(b) for d, b in plain.items()}, anomalies


@pytest.mark.parametrize(
    "suite",
    ["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"],
)
def test_tls13_application_data_comes_out_as_written(tmp_path: Path, suite: str) -> None:
    talk = converse(tmp_path, tls13_suite=suite, exchanges=EXCHANGES, alpn=("stomp",))
    session, plain, anomalies = replay(talk)
    assert plain == {C2S: bytes(talk.written[C2S]), S2C: bytes(talk.written[S2C])}
    assert anomalies == []
    facts = session.facts
    assert (facts.version, facts.cipher_suite) == ("TLS 1.3", suite)
    assert (facts.server_name, facts.alpn) == ("broker.test", "stomp")
    assert facts.decrypted and facts.not_decrypted_reason is None


@pytest.mark.parametrize(
    ("cipher", "suite", "encrypt_then_mac"),
    [
        ("ECDHE-RSA-AES128-GCM-SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", True),
        ("ECDHE-RSA-AES256-GCM-SHA384", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", True),
        ("ECDHE-RSA-CHACHA20-POLY1305", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", True),
        ("ECDHE-RSA-AES128-SHA", "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", True),
        ("ECDHE-RSA-AES128-SHA", "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", False),
        ("ECDHE-RSA-AES256-SHA384", "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384", False),
        ("AES256-SHA256", "TLS_RSA_WITH_AES_256_CBC_SHA256", True),
    ],
)
def test_tls12_application_data_comes_out_as_written(
    tmp_path: Path, cipher: str, suite: str, encrypt_then_mac: bool
) -> None:
    talk = converse(
        tmp_path, tls12_cipher=cipher, encrypt_then_mac=encrypt_then_mac, exchanges=EXCHANGES
    )
    session, plain, anomalies = replay(talk)
    assert plain == {C2S: bytes(talk.written[C2S]), S2C: bytes(talk.written[S2C])}
    assert anomalies == []
    assert (session.facts.version, session.facts.cipher_suite) == ("TLS 1.2", suite)
    assert session.facts.decrypted


@pytest.mark.parametrize("tls12_cipher", [None, "ECDHE-RSA-AES128-GCM-SHA256"])
def test_a_large_body_spans_many_records(tmp_path: Path, tls12_cipher: str | None) -> None:
    body = bytes(range(256)) * 400  # 100 KB: seven 16 KB records
    frame = b"SEND\ndestination:/queue/a\ncontent-length:102400\n\n" + body + b"\x00"
    talk = converse(tmp_path, tls12_cipher=tls12_cipher, exchanges=[(C2S, CONNECT), (C2S, frame)])
    _, plain, anomalies = replay(talk)
    assert plain[C2S] == CONNECT + frame and anomalies == []


def test_a_key_update_renews_the_keys(tmp_path: Path) -> None:
    talk = converse(tmp_path, exchanges=EXCHANGES, key_update_after=2)
    _, plain, anomalies = replay(talk)
    assert plain[C2S] == bytes(talk.written[C2S]) and anomalies == []


def test_without_keys_nothing_is_decrypted_and_the_reason_is_no_keys(tmp_path: Path) -> None:
    talk = converse(tmp_path, exchanges=EXCHANGES)
    session, plain, anomalies = replay(talk, KeyLog())
    assert plain == {C2S: b"", S2C: b""} and [a.kind for a in anomalies] == [TLS_NO_KEYS]
    assert anomalies[0].tcp_offset == 0 and session.facts.version == "TLS 1.3"
    assert session.facts.server_name == "broker.test"
    assert not session.facts.decrypted and session.facts.not_decrypted_reason == NO_KEYS


@pytest.mark.parametrize("tls12_cipher", [None, "ECDHE-RSA-AES128-GCM-SHA256"])
def test_wrong_keys_are_bad_record_macs_with_offsets(
    tmp_path: Path, tls12_cipher: str | None
) -> None:
    talk = converse(tmp_path, tls12_cipher=tls12_cipher, exchanges=EXCHANGES)
    other = converse(tmp_path, tls12_cipher=tls12_cipher, exchanges=EXCHANGES)
    wrong = KeyLog()  # the other connection's secrets under this one's client random
    (client_random,) = keylog_of(talk).secrets
    wrong.secrets[client_random] = next(iter(keylog_of(other).secrets.values()))
    session, plain, anomalies = replay(talk, wrong)
    assert plain == {C2S: b"", S2C: b""}
    assert anomalies and {a.kind for a in anomalies} == {TLS_BAD_RECORD}
    streams = {d: len(talk.stream(d)) for d in (C2S, S2C)}
    assert all(0 <= a.tcp_offset < streams[a.direction] for a in anomalies)
    assert session.facts.not_decrypted_reason == BAD_RECORD_MAC


def test_a_capture_that_starts_after_the_handshake(tmp_path: Path) -> None:
    talk = converse(tmp_path, exchanges=EXCHANGES)
    first_data = next(i for i, (d, data) in enumerate(talk.wire) if i > 3 and d is C2S)
    session, plain, _ = replay(talk, skip=first_data)
    assert plain == {C2S: b"", S2C: b""}
    assert session.facts.not_decrypted_reason == HANDSHAKE_NOT_SEEN


def test_a_damaged_record_is_skipped_and_the_next_decrypted(tmp_path: Path) -> None:
    talk = converse(tmp_path, exchanges=[(C2S, CONNECT), (C2S, SEND), (C2S, SEND)])
    sent = [i for i, (d, _) in enumerate(talk.wire) if d is C2S]
    damaged = sent[-2]  # the second SEND's record, after the handshake
    direction, data = talk.wire[damaged]
    talk.wire[damaged] = (direction, data[:-1] + bytes([data[-1] ^ 1]))
    _, plain, anomalies = replay(talk)
    assert plain[C2S] == CONNECT + SEND
    assert [a.kind for a in anomalies] == [TLS_BAD_RECORD]


def test_a_gap_stops_the_direction_with_an_anomaly(tmp_path: Path) -> None:
    talk = converse(tmp_path, exchanges=EXCHANGES)
    session = TlsSession(keylog_of(talk).get)
    events = session.receive_gap(C2S, 1, 0, 100)
    assert [e.kind for e in events if isinstance(e, TlsAnomaly)] == [TLS_GAP]
    assert session.receive(C2S, 2, 100, talk.stream(C2S)) == []


def test_bytes_that_are_not_tls_are_one_anomaly(tmp_path: Path) -> None:
    session = TlsSession(KeyLog().get)
    events = session.receive(C2S, 1, 0, CONNECT)
    assert [e.kind for e in events if isinstance(e, TlsAnomaly)] == [TLS_NOT_TLS]
    assert session.receive(C2S, 2, len(CONNECT), SEND) == []


def test_no_secret_shows_in_repr_or_anomalies(tmp_path: Path) -> None:
    talk = converse(tmp_path, exchanges=EXCHANGES)
    keylog = keylog_of(talk)
    secrets = [line.split()[2] for line in talk.keylog.splitlines() if line and line[0] != "#"]
    shown = repr(keylog) + repr(list(keylog.secrets.values()))
    assert secrets and not any(s in shown or s.upper() in shown for s in secrets)
