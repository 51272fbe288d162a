"""The transport's events through a SessionModel: the rows of a STOMP-over-WebSocket session."""

from __future__ import annotations

from pipeline.net import Direction
from pipeline.session import Endpoint, SessionModel
from pipeline.session.frame_rows import TableRows
from pipeline.stomp import encode_frame
from pipeline.websocket import Transport, apply
from schemas import TABLES, load
from tests.support.websocket_wire import Side, deflate_extension, request, response

T0 = 1_700_000_000_000_000_000
MS = 1_000_000


class WsConversation:
    def __init__(self, deflate: bool = False) -> None:
        self.model = SessionModel("ws1", Endpoint("10.0.0.1", 40000), Endpoint("10.0.0.2", 15674))
        self.transport = Transport()
        self.offsets = {"c2s": 0, "s2c": 0}
        extension = ""
        client_ext = server_ext = None
        if deflate:
            extension, client_ext, server_ext = deflate_extension()
        self.client_side, self.server_side = Side(True, client_ext), Side(False, server_ext)
        self.tcp("c2s", 0, request("Sec-WebSocket-Extensions: permessage-deflate\r\n"))
        self.tcp("s2c", 1, response(extra=extension))

    def tcp(self, direction: str, ms: float, data: bytes) -> None:
        ts = T0 + int(ms * MS)
        apply(
            self.model,
            self.transport.receive(Direction(direction), ts, self.offsets[direction], data),
        )
        self.offsets[direction] += len(data)

    def client(self, ms: float, command: str, headers: list, body: bytes = b"") -> None:
        self.tcp("c2s", ms, self.client_side.text(encode_frame(command, headers, body)))

    def server(self, ms: float, command: str, headers: list, body: bytes = b"") -> None:
        frame = encode_frame(command, headers, body) + b"\n"
        self.tcp("s2c", ms, self.server_side.text(frame))

    def finish(self, ms: float) -> dict[str, TableRows]:
        apply(self.model, self.transport.finish(T0 + int(ms * MS)))
        self.model.finish(T0 + int(ms * MS))
        return self.model.drain()


def _session(deflate: bool = False) -> dict[str, TableRows]:
    talk = WsConversation(deflate)
    talk.client(2, "CONNECT", [("accept-version", "1.2"), ("host", "/"), ("heart-beat", "1000,0")])
    talk.server(3, "CONNECTED", [("version", "1.2"), ("heart-beat", "0,1000")])
    talk.client(4, "SUBSCRIBE", [("id", "0"), ("destination", "/queue/a"), ("ack", "client")])
    talk.client(5, "SEND", [("destination", "/queue/a"), ("receipt", "r1")], b"hello")
    talk.server(6, "RECEIPT", [("receipt-id", "r1")])
    talk.server(
        7, "MESSAGE", [("subscription", "0"), ("message-id", "m1"), ("ack", "a1")], b"hello"
    )
    talk.tcp("c2s", 8, talk.client_side.text("\n"))  # a beat: a message of one EOL
    talk.client(9, "ACK", [("id", "a1")])
    talk.tcp("s2c", 10, talk.server_side.ping(b"p"))
    talk.tcp("c2s", 12.5, talk.client_side.pong(b"p"))
    talk.tcp("c2s", 20, talk.client_side.close(1000, "bye"))
    talk.tcp("s2c", 21, talk.server_side.close(1000, "bye"))
    return talk.finish(30)


def test_websocket_session_rows() -> None:
    for deflate in (False, True):
        rows = _session(deflate)
        session = rows["sessions"][0]
        assert session["transport"] == "websocket"
        assert session["ws_path"] == "/ws" and session["ws_status"] == 101
        assert session["ws_subprotocol"] == "v12.stomp"
        assert session["ws_extensions"] == ("permessage-deflate" if deflate else None)
        assert (session["ws_pings"], session["ws_pongs"]) == (1, 1)
        assert (session["ws_close_code"], session["ws_closed_by"]) == (1000, "client")
        assert session["end_reason"] == "websocket_close"
        assert session["violations"] == 0, rows["anomalies"]
        commands = [(f["direction"], f["command"]) for f in rows["frames"]]
        assert commands == [
            ("c2s", "CONNECT"),
            ("s2c", "CONNECTED"),
            ("c2s", "SUBSCRIBE"),
            ("c2s", "SEND"),
            ("s2c", "RECEIPT"),
            ("s2c", "MESSAGE"),
            ("c2s", "ACK"),
        ]
        request_length = len(request("Sec-WebSocket-Extensions: permessage-deflate\r\n"))
        assert rows["frames"][0]["stream_offset"] == 0
        assert rows["frames"][0]["tcp_offset"] == request_length
        assert all(f["tcp_offset"] > f["stream_offset"] for f in rows["frames"])
        (beat,) = rows["heartbeats"]
        assert beat["direction"] == "c2s" and beat["expected_ms"] == 1000
        (ack,) = rows["acks"]
        assert ack["latency_ms"] == 2.0 and ack["acked_message_count"] == 1
        assert rows["receipts"][0]["latency_ms"] == 1.0
        controls = rows["websocket_controls"]
        assert [(c["side"], c["kind"]) for c in controls] == [
            ("server", "ping"),
            ("client", "pong"),
            ("client", "close"),
            ("server", "close"),
        ]
        assert controls[1]["rtt_ms"] == 2.5 and controls[0]["rtt_ms"] is None
        assert controls[2]["close_reason"] == "bye"
        for table in TABLES:
            load(table).arrow_table([{**row, "batch_id": "b"} for row in rows[table]])


def test_tcp_session_through_the_transport_is_unchanged() -> None:
    model = SessionModel("t1", Endpoint("10.0.0.1", 40000), Endpoint("10.0.0.2", 61613))
    transport = Transport()
    connect = encode_frame("CONNECT", [("accept-version", "1.2"), ("host", "/")])
    connected = encode_frame("CONNECTED", [("version", "1.2")]) + b"\n"
    apply(model, transport.receive(Direction.C2S, T0, 0, connect[:3]))
    apply(model, transport.receive(Direction.C2S, T0 + MS, 3, connect[3:]))
    apply(model, transport.receive(Direction.S2C, T0 + 2 * MS, 0, connected))
    model.finish(T0 + 3 * MS)
    rows = model.drain()
    session = rows["sessions"][0]
    assert session["transport"] == "tcp" and session["ws_path"] is None
    assert session["end_reason"] == "capture_end" and session["version"] == "1.2"
    assert [f["tcp_offset"] for f in rows["frames"]] == [0, 0]
    assert rows["websocket_controls"] == []


def test_refused_upgrade_is_a_session_with_an_anomaly_and_no_frames() -> None:
    model = SessionModel("r1", Endpoint("10.0.0.1", 40000), Endpoint("10.0.0.2", 15674))
    transport = Transport()
    apply(model, transport.receive(Direction.C2S, T0, 0, request()))
    apply(model, transport.receive(Direction.S2C, T0 + MS, 0, response("404 Not Found", None)))
    model.finish(T0 + 2 * MS)
    rows = model.drain()
    session = rows["sessions"][0]
    assert session["transport"] == "websocket" and session["ws_status"] == 404
    assert rows["frames"] == []
    (anomaly,) = rows["anomalies"]
    assert anomaly["source"] == "websocket" and anomaly["kind"] == "websocket_upgrade_refused"


def test_a_websocket_session_starts_with_its_upgrade_request() -> None:
    talk = WsConversation()
    rows = talk.finish(5)
    (session,) = rows["sessions"]
    assert session["started_at_ns"] == T0  # the request, held while the transport decided
