"""pipeline/tls/transport.py: STOMP and STOMP over WebSocket inside real TLS conversations come
out of the inner transport as they went in, with the TCP offsets of the records that carried
them."""

from __future__ import annotations

from pathlib import Path

from pipeline.net import Direction
from pipeline.tls.keylog import KeyLog
from pipeline.tls.records import APPLICATION_DATA
from pipeline.tls.session import NO_KEYS
from pipeline.tls.transport import TlsSeen, TlsTransport, starts_tls
from pipeline.websocket.events import HandshakeSeen, StompData, Violation
from tests.pipeline.websocket.wire import Side, request, response
from tests.support.tls_pair import Conversation, converse

C2S, S2C = Direction.C2S, Direction.S2C
CONNECT = b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00"
CONNECTED = b"CONNECTED\nversion:1.2\n\n\x00"
SEND = b"SEND\ndestination:/queue/a\n\nhello\x00"


def play(talk: Conversation, keys: KeyLog) -> list[object]:
    transport = TlsTransport(keys.get)
    offsets = {C2S: 0, S2C: 0}
    events: list[object] = []
    for number, (direction, data) in enumerate(talk.wire):
        events += transport.receive(direction, number, offsets[direction], data)
        offsets[direction] += len(data)
    for direction in (C2S, S2C):
        events += transport.receive_eof(direction, len(talk.wire))
    return events + transport.finish(len(talk.wire))


def keys_of(talk: Conversation) -> KeyLog:
    keys = KeyLog()
    keys.add_lines(talk.keylog.splitlines())
    return keys


def stomp(events: list[object], direction: Direction) -> bytes:
    return b"".join(e.data for e in events if isinstance(e, StompData) and e.direction == direction)


def test_stomp_over_tls_comes_out_at_its_records_offsets(tmp_path: Path) -> None:
    talk = converse(tmp_path, exchanges=[(C2S, CONNECT), (S2C, CONNECTED), (C2S, SEND)])
    assert starts_tls(talk.wire[0][1])
    events = play(talk, keys_of(talk))
    assert stomp(events, C2S) == CONNECT + SEND and stomp(events, S2C) == CONNECTED
    streams = {d: talk.stream(d) for d in (C2S, S2C)}
    for event in events:
        if isinstance(event, StompData):
            record = streams[Direction(event.direction)][event.tcp_offset :]
            assert record[0] == APPLICATION_DATA and record[1] == 3
    (seen,) = [e for e in events if isinstance(e, TlsSeen)]
    assert seen.facts.decrypted and seen.facts.version == "TLS 1.3"


def test_websocket_inside_tls_is_deframed(tmp_path: Path) -> None:
    client, server = Side(client=True), Side(client=False)
    exchanges = [
        (C2S, request()),
        (S2C, response()),
        (C2S, client.text(CONNECT)),
        (S2C, server.text(CONNECTED)),
        (C2S, client.text(SEND)),
    ]
    talk = converse(tmp_path, exchanges=exchanges)
    events = play(talk, keys_of(talk))
    assert any(isinstance(e, HandshakeSeen) and e.stomp for e in events)
    assert stomp(events, C2S) == CONNECT + SEND and stomp(events, S2C) == CONNECTED
    stream = talk.stream(C2S)
    for event in events:
        if isinstance(event, StompData) and event.direction == C2S:
            assert stream[event.tcp_offset] == APPLICATION_DATA


def test_without_keys_the_connection_is_told_not_decoded(tmp_path: Path) -> None:
    talk = converse(tmp_path, exchanges=[(C2S, CONNECT), (S2C, CONNECTED)])
    events = play(talk, KeyLog())
    assert not any(isinstance(e, StompData | Violation) for e in events)
    (seen,) = [e for e in events if isinstance(e, TlsSeen)]
    assert seen.facts.not_decrypted_reason == NO_KEYS


def test_plain_stomp_and_http_do_not_start_tls() -> None:
    assert not starts_tls(CONNECT) and not starts_tls(request()) and not starts_tls(b"\x16")
