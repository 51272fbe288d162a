from __future__ import annotations

import pytest

from pipeline.net import Direction
from pipeline.session import Endpoint, SessionModel
from pipeline.websocket import apply
from pipeline.websocket import violations as v
from pipeline.websocket.events import (
    Control,
    HandshakeSeen,
    NotWebSocket,
    StompData,
    StompGap,
    Violation,
)
from pipeline.websocket.transport import IGNORED, OPEN, TCP, Transport
from tests.support.websocket_wire import Side, client_raw, deflate_extension, request, response

CONNECT = b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00"
CONNECTED = b"CONNECTED\nversion:1.2\nheart-beat:0,0\n\n\x00\n"


def _feed(transport: Transport, script: list[tuple[str, bytes]], step: int = 0) -> list:
    offsets = {"c2s": 0, "s2c": 0}
    events = []
    for n, (direction, data) in enumerate(script):
        pieces = [data[i : i + step] for i in range(0, len(data), step)] if step else [data]
        for piece in pieces:
            events += transport.receive(Direction(direction), n, offsets[direction], piece)
            offsets[direction] += len(piece)
    return events + transport.finish(len(script))


def _stomp(events: list, direction: str) -> bytes:
    return b"".join(e.data for e in events if isinstance(e, StompData) and e.direction == direction)


@pytest.mark.parametrize("step", [0, 1, 17])
def test_upgrade_then_stomp_inside(step: int) -> None:
    client, server = Side(True), Side(False)
    script = [
        ("c2s", request()),
        ("s2c", response()),
        ("c2s", client.text(CONNECT)),
        ("s2c", server.text(CONNECTED)),
        ("c2s", client.ping(b"hb") + client.text("\n")),
        ("s2c", server.pong(b"hb")),
    ]
    transport = Transport()
    events = _feed(transport, script, step)
    assert transport.state == OPEN and transport.websocket
    (handshake,) = [e for e in events if isinstance(e, HandshakeSeen)]
    assert handshake.path == "/ws" and handshake.status == 101 and handshake.stomp
    assert handshake.subprotocol == "v12.stomp"
    assert handshake.subprotocols_offered == "v10.stomp, v11.stomp, v12.stomp"
    assert handshake.origin == "http://localhost:8000"
    assert handshake.user_agent == "test-client/1.0"
    assert _stomp(events, "c2s") == CONNECT + b"\n"
    assert _stomp(events, "s2c") == CONNECTED
    first = next(e for e in events if isinstance(e, StompData))
    assert first.stomp_offset == 0 and first.tcp_offset == len(request())
    pong = next(e for e in events if isinstance(e, Control) and e.kind == "pong")
    assert pong.rtt_ns == 1  # ping fed at "time" 4, pong at 5
    assert not [e for e in events if isinstance(e, Violation)]


def test_client_frames_in_the_same_segment_as_the_request_wait_for_the_response() -> None:
    client, server = Side(True), Side(False)
    script = [
        ("c2s", request() + client.text(CONNECT)),
        ("s2c", response() + server.text(CONNECTED)),
    ]
    events = _feed(Transport(), script)
    assert _stomp(events, "c2s") == CONNECT and _stomp(events, "s2c") == CONNECTED


def test_permessage_deflate_from_the_response() -> None:
    header, client_ext, server_ext = deflate_extension()
    client, server = Side(True, client_ext), Side(False, server_ext)
    script = [
        ("c2s", request("Sec-WebSocket-Extensions: permessage-deflate\r\n")),
        ("s2c", response(extra=header)),
        ("c2s", client.text(CONNECT)),
        ("s2c", server.text(CONNECTED)),
    ]
    events = _feed(Transport(), script, 5)
    (handshake,) = [e for e in events if isinstance(e, HandshakeSeen)]
    assert handshake.extensions == "permessage-deflate"
    assert _stomp(events, "c2s") == CONNECT and _stomp(events, "s2c") == CONNECTED


def test_refused_upgrade_decodes_nothing() -> None:
    script = [
        ("c2s", request()),
        ("s2c", response("403 Forbidden", None) + b"<html>no</html>"),
        ("c2s", b"CONNECT\n\n\x00"),
    ]
    transport = Transport()
    events = _feed(transport, script)
    assert transport.state == IGNORED
    (handshake,) = [e for e in events if isinstance(e, HandshakeSeen)]
    assert handshake.status == 403 and not handshake.stomp
    assert [e.kind for e in events if isinstance(e, Violation)] == [v.UPGRADE_REFUSED]
    assert not [e for e in events if isinstance(e, StompData)]


def test_other_subprotocol_decodes_nothing() -> None:
    script = [("c2s", request()), ("s2c", response(protocol="mqtt")), ("c2s", Side(True).text("x"))]
    events = _feed(Transport(), script)
    assert [e.kind for e in events if isinstance(e, Violation)] == [v.NOT_STOMP]
    assert not [e for e in events if isinstance(e, StompData)]


def test_no_response_captured() -> None:
    events = _feed(Transport(), [("c2s", request())])
    (handshake,) = [e for e in events if isinstance(e, HandshakeSeen)]
    assert handshake.status is None and not handshake.stomp


@pytest.mark.parametrize(
    "script",
    [
        [("c2s", CONNECT), ("s2c", CONNECTED)],
        [("s2c", CONNECTED), ("c2s", CONNECT)],  # server speaks first: not an upgrade
        [("c2s", b"G"), ("c2s", b"ET / HTTP/1.1\r\nHost: x\r\n\r\n")],  # plain HTTP
    ],
)
def test_plain_tcp_passes_through_unchanged(script: list[tuple[str, bytes]]) -> None:
    transport = Transport()
    events = _feed(transport, script)
    assert transport.state == TCP and not transport.websocket
    assert isinstance(events[0], NotWebSocket)
    for direction in ("c2s", "s2c"):
        sent = b"".join(data for d, data in script if d == direction)
        assert _stomp(events, direction) == sent
    assert all(e.stomp_offset == e.tcp_offset for e in events if isinstance(e, StompData))


def test_gap_while_undecided_makes_it_tcp_and_is_passed_on() -> None:
    transport = Transport()
    assert transport.receive(Direction.C2S, 0, 0, b"GE") == []
    events = transport.receive_gap(Direction.C2S, 1, 2, 10)
    assert isinstance(events[0], NotWebSocket)
    assert isinstance(events[-1], StompGap) and events[-1].size == 10


def test_mid_stream_is_tcp() -> None:
    transport = Transport(mid_stream=True)
    (event,) = transport.receive(Direction.C2S, 0, 500, request())
    assert isinstance(event, StompData) and event.stomp_offset == 500


def _session_rows(transport: Transport, script: list[tuple[str, bytes]], bound: int) -> dict:
    """``script`` through the transport into a session model, checking after every packet
    that the transport holds at most ``bound`` bytes per direction (plus the packet itself)."""
    model = SessionModel("s", Endpoint("10.0.0.1", 40000), Endpoint("10.0.0.2", 15674))
    offsets = {"c2s": 0, "s2c": 0}
    for n, (direction, data) in enumerate(script):
        apply(model, transport.receive(Direction(direction), n, offsets[direction], data))
        offsets[direction] += len(data)
        assert all(held <= bound + len(data) for held in transport._held_bytes.values())
        assert len(transport._request) <= bound + len(data)
        assert len(transport._response) <= bound + len(data)
    apply(model, transport.finish(len(script)))
    model.finish(len(script))
    return model.drain()


def _frames(rows: dict, direction: str) -> list[str]:
    return [f["command"] for f in rows["frames"] if f["direction"] == direction]


def _anomalies(rows: dict) -> list[str]:
    return [a["kind"] for a in rows["anomalies"] if a["source"] == "websocket"]


def test_unfinished_request_head_holds_a_bounded_amount_then_is_tcp() -> None:
    """The request head never ends while the server sends twice the bound: the transport
    holds at most the bound, tells it once, and the STOMP frames go on as over TCP."""
    bound = 4096
    message = b"MESSAGE\ndestination:/q/a\nmessage-id:1\nsubscription:0\n\nhi\x00"
    script = [("c2s", b"GET /ws HTTP/1.1\r\nUpgrade: websocket\r\n")]
    script += [("s2c", message)] * (2 * bound // len(message) + 1)
    script += [("c2s", b"\r\n" + CONNECT)]
    transport = Transport(max_held=bound)
    rows = _session_rows(transport, script, bound)
    assert transport.state == TCP
    assert _anomalies(rows) == [v.UPGRADE_UNFINISHED]
    assert _frames(rows, "s2c") == ["MESSAGE"] * (len(script) - 2)
    (session,) = rows["sessions"]
    assert session["s2c_bytes"] == sum(len(d) for s, d in script if s == "s2c")
    assert session["c2s_bytes"] == sum(len(d) for s, d in script if s == "c2s")


@pytest.mark.parametrize("bound", [4096, None])
def test_upgrade_without_response_holds_a_bounded_amount_then_is_tcp(bound: int | None) -> None:
    """Many small client packets after an unanswered upgrade: each one costs the same (the
    held bytes stay under the bound, nothing rescanned), then the rest is STOMP over TCP."""
    transport = Transport() if bound is None else Transport(max_held=bound)
    limit = transport.max_held
    send = b"SEND\ndestination:/q/a\n\nx\x00"
    script = [("c2s", request())] + [("c2s", send)] * (2 * limit // len(send))
    rows = _session_rows(transport, script, limit)
    assert transport.state == TCP
    (kind,) = _anomalies(rows)
    assert kind == v.UPGRADE_UNFINISHED
    # the request head runs into the first SEND: one frame that is not STOMP, then the rest
    commands = _frames(rows, "c2s")
    assert commands[0].startswith("GET ") and commands[1:] == ["SEND"] * (len(script) - 2)
    (session,) = rows["sessions"]
    assert session["c2s_bytes"] == sum(len(d) for _, d in script)


def test_request_head_search_resumes_where_it_stopped() -> None:
    """The head is found when its blank line straddles packets, fed a byte at a time."""
    transport = Transport()
    head = request()
    for n in range(len(head)):
        transport.receive(Direction.C2S, n, n, head[n : n + 1])
    assert transport._request_scanned == len(head) - 3
    assert transport.state == "AWAITING_RESPONSE"


def test_an_undecided_upgrade_carried_over_keeps_its_bound() -> None:
    """Pickled as a carried connection, the held bytes and the search positions go along."""
    import pickle

    transport = Transport(max_held=4096)
    head = request()
    transport.receive(Direction.C2S, 0, 0, head[:50])
    transport = pickle.loads(pickle.dumps(transport))
    transport.receive(Direction.C2S, 1, 50, head[50:])
    assert transport.state == "AWAITING_RESPONSE"
    transport = pickle.loads(pickle.dumps(transport))
    send = b"SEND\ndestination:/q/a\n\nx\x00"
    events: list = []
    for n in range(4096 // len(send) + 1):
        events += transport.receive("c2s", 2 + n, len(head) + n * len(send), send)
    assert transport.state == TCP
    assert [e.kind for e in events if isinstance(e, Violation)] == [v.UPGRADE_UNFINISHED]
    assert _stomp(events, "c2s") == head + send * (4096 // len(send) + 1)


def test_after_a_bomb_the_stomp_frames_go_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """Context takeover on: uncompressed SEND and DISCONNECT after a deflate bomb are decoded,
    and the RECEIPT answers the DISCONNECT."""
    import zlib

    from pipeline.websocket import deflate

    monkeypatch.setattr(deflate, "MAX_MESSAGE", 1 << 20)
    header, client_ext, _ = deflate_extension()
    client, server = Side(True, client_ext), Side(False)
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    bomb = compressor.compress(b"A" * (4 << 20)) + compressor.flush(zlib.Z_SYNC_FLUSH)
    script = [
        ("c2s", request("Sec-WebSocket-Extensions: permessage-deflate\r\n")),
        ("s2c", response(extra=header)),
        ("c2s", client.text(CONNECT)),
        ("s2c", server.text(CONNECTED)),
        ("c2s", client_raw(0x1, bomb[:-4], rsv=0x40)),
        ("c2s", client_raw(0x1, b"SEND\ndestination:/q/a\n\nhi\x00")),
        ("c2s", client_raw(0x1, b"DISCONNECT\nreceipt:7\n\n\x00")),
        ("s2c", server.text(b"RECEIPT\nreceipt-id:7\n\n\x00")),
    ]
    rows = _session_rows(Transport(), script, 1 << 16)
    assert _frames(rows, "c2s") == ["CONNECT", "SEND", "DISCONNECT"]
    assert _frames(rows, "s2c") == ["CONNECTED", "RECEIPT"]
    kinds = [a["kind"] for a in rows["anomalies"]]
    assert kinds == [v.INFLATE_FAILED]
