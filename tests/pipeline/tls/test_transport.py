"""pipeline/tls/transport.py: STOMP and STOMP over WebSocket inside real TLS conversations come
out of the inner transport as they went in, with the TCP offsets of the records that carried
them."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from pipeline.net import Direction
from pipeline.session import Endpoint, SessionModel
from pipeline.tls.keylog import KeyLog, use_keylog
from pipeline.tls.records import APPLICATION_DATA
from pipeline.tls.session import NO_KEYS, TlsFacts
from pipeline.tls.transport import TlsTransport, looks_like_tls, starts_tls
from pipeline.websocket import apply
from pipeline.websocket.events import HandshakeSeen, StompData, Violation
from tests.support.tls_pair import Conversation, converse
from tests.support.websocket_wire import Side, request, response

C2S, S2C = Direction.C2S, Direction.S2C
CONNECT = b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00"
CONNECTED = b"CONNECTED\nversion:1.2\n\n\x00"
SEND = b"SEND\ndestination:/queue/a\n\nhello\x00"


def play(talk: Conversation, keys: KeyLog) -> list[object]:
    """The transport's events, then its facts."""
    transport = TlsTransport(keys.get)
    offsets = {C2S: 0, S2C: 0}
    events: list[object] = []
    for number, (direction, data) in enumerate(talk.wire):
        events += transport.receive(direction, number, offsets[direction], data)
        offsets[direction] += len(data)
    for direction in (C2S, S2C):
        events += transport.receive_eof(direction, len(talk.wire))
    return [*events, *transport.finish(len(talk.wire)), transport.facts]


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
    facts = events[-1]
    assert isinstance(facts, TlsFacts) and facts.decrypted and facts.version == "TLS 1.3"


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
    assert not any(isinstance(e, StompData) for e in events)
    assert [e.kind for e in events if isinstance(e, Violation)] == ["tls_no_keys"]
    facts = events[-1]
    assert isinstance(facts, TlsFacts) and facts.not_decrypted_reason == NO_KEYS


def test_plain_stomp_and_http_do_not_start_tls(tmp_path: Path) -> None:
    assert not starts_tls(CONNECT) and not starts_tls(request()) and not starts_tls(b"\x16")
    assert not looks_like_tls(CONNECT) and not looks_like_tls(b"\n") and not looks_like_tls(SEND)
    talk = converse(tmp_path, exchanges=[(C2S, CONNECT), (S2C, CONNECTED)])
    assert looks_like_tls(talk.wire[-1][1])


def test_a_connection_carried_in_the_middle_resumes_where_it_was(tmp_path: Path) -> None:
    """Pickled between two batches, as carried connection state is, after any chunk."""
    import pickle

    talk = converse(
        tmp_path,
        tls12_cipher="ECDHE-RSA-AES128-SHA",
        exchanges=[(C2S, CONNECT), (S2C, CONNECTED), (C2S, SEND), (C2S, SEND)],
    )
    whole = stomp(play(talk, keys_of(talk)), C2S)
    use_keylog(keys_of(talk))  # the next task's key log, where a carried connection looks
    for cut in range(1, len(talk.wire)):
        transport = TlsTransport(keys_of(talk).get)
        offsets = {C2S: 0, S2C: 0}
        events: list[object] = []
        for number, (direction, data) in enumerate(talk.wire):
            if number == cut:
                transport = pickle.loads(pickle.dumps(transport))
            events += transport.receive(direction, number, offsets[direction], data)
            offsets[direction] += len(data)
        assert stomp(events, C2S) == whole == CONNECT + SEND + SEND
    use_keylog(None)


@pytest.mark.parametrize("tls12_cipher", [None, "ECDHE-RSA-AES128-GCM-SHA256"])
def test_carried_state_holds_no_secret_of_the_key_log(
    tmp_path: Path, tls12_cipher: str | None
) -> None:
    """Only derived record keys, and TLS 1.3's application traffic secrets (a KeyUpdate derives
    the next from them); never the key log, a master secret or a handshake secret."""
    import pickle

    talk = converse(
        tmp_path, tls12_cipher=tls12_cipher, exchanges=[(C2S, CONNECT), (S2C, CONNECTED)]
    )
    other = converse(tmp_path, exchanges=[(C2S, CONNECT)])
    keys = keys_of(talk)
    keys.add_lines(other.keylog.splitlines())
    transport = TlsTransport(keys.get)
    offsets = {C2S: 0, S2C: 0}
    for number, (direction, data) in enumerate(talk.wire[:4]):
        transport.receive(direction, number, offsets[direction], data)
        offsets[direction] += len(data)
    carried = pickle.dumps(transport)
    kept = {"CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0"}
    for line in talk.keylog.splitlines() + other.keylog.splitlines():
        if line and not line.startswith("#"):
            label, _, secret = line.split()
            if line in other.keylog or label not in kept:
                assert bytes.fromhex(secret) not in carried, label


def tables(talk: Conversation, runs: random.Random | None) -> dict[str, list[Any]]:
    """The model's rows of a conversation fed packet by packet (``runs`` None), or in runs of
    random length whenever the transport takes them, each packet cut in random pieces."""
    transport = TlsTransport(keys_of(talk).get)
    model = SessionModel("s", Endpoint("10.0.0.1", 40000), Endpoint("10.0.0.2", 61614))
    model.map_tcp_offsets(transport.tcp_offsets)
    offsets = {C2S: 0, S2C: 0}
    wire = list(enumerate(talk.wire))
    while wire:
        number, (direction, data) = wire.pop(0)
        if runs is None or not transport.runs:
            events = transport.receive(direction, number, offsets[direction], data)
            apply(model, events, ("f", number))
            offsets[direction] += len(data)
            continue
        joined, sizes, times = [data], [len(data)], [number]
        while wire and wire[0][1][0] is direction and runs.random() < 0.7:
            number, (_, more) = wire.pop(0)
            joined.append(more)
            sizes.append(len(more))
            times.append(number)
        run = b"".join(joined)
        transport.receive_run(
            model, direction, offsets[direction], run, sizes, times, [("f", t) for t in times]
        )
        offsets[direction] += len(run)
    model.on_tls(transport.facts)
    model.finish(len(talk.wire))
    return {table: list(rows) for table, rows in model.drain().items()}


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"tls12_cipher": "ECDHE-RSA-AES128-GCM-SHA256"},
        {"tls12_cipher": "ECDHE-RSA-AES128-SHA256"},
    ],
    ids=["tls13", "tls12-gcm", "tls12-cbc"],
)
def test_runs_opened_in_bulk_give_the_rows_of_packets_one_by_one(
    tmp_path: Path, options: dict[str, Any]
) -> None:
    exchanges = [(C2S, CONNECT), (S2C, CONNECTED)]
    for n in range(30):
        message = b"MESSAGE\nmessage-id:%d\ndestination:/q/a\n\n%s\0" % (n, b"x" * n * 40)
        exchanges += [(S2C, message)]
        if n % 4 == 0:
            exchanges += [(C2S, SEND)]
    key_update = None if options else 10  # TLS 1.3: a KeyUpdate stops a run mid-way
    talk = converse(tmp_path, exchanges=exchanges, key_update_after=key_update, **options)
    one_by_one = tables(talk, None)
    frames = one_by_one["frames"]
    assert len(frames) == 2 + 30 + 8
    streams = {d: talk.stream(d) for d in (C2S, S2C)}
    for frame in frames:  # each at the TCP offset of the record carrying its first byte
        record = streams[Direction(frame["direction"])][frame["tcp_offset"] :]
        assert record[0] == APPLICATION_DATA and frame["tcp_offset"] > frame["stream_offset"]
    for seed in range(5):
        assert tables(talk, random.Random(seed)) == one_by_one, seed
