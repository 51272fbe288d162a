"""Client-side record of one stomp.py connection, kept while a sample is captured.

The record is what the client itself sent and saw (stomp.py listener hooks), so the
pipeline's view of the capture can be checked against it.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import stomp
from stomp.utils import Frame

from tests.support.brokers import Broker

CONNECT_COMMANDS = ("CONNECT", "STOMP")
_UNESCAPES = {"\\\\": "\\", "\\n": "\n", "\\c": ":", "\\r": "\r"}


def unescape_header(value: str) -> str:
    """Undo stomp.py's 1.1/1.2 header escaping (on_send sees the escaped frame)."""
    out, i = [], 0
    while i < len(value):
        pair = value[i : i + 2]
        if pair in _UNESCAPES:
            out.append(_UNESCAPES[pair])
            i += 2
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


def parse_heart_beat(value: str | None) -> list[int] | None:
    if value is None:
        return None
    parts = value.replace(" ", "").split(",")
    return [int(part) for part in parts] if len(parts) == 2 else None


def effective_heart_beats(asked: list[int] | None, granted: list[int] | None) -> dict[str, int]:
    """Intervals per the 1.1 spec: each direction is MAX of the two sides, 0 if either is 0."""
    cx, cy = asked or [0, 0]
    sx, sy = granted or [0, 0]
    return {
        "client_to_server_ms": 0 if cx == 0 or sy == 0 else max(cx, sy),
        "server_to_client_ms": 0 if sx == 0 or cy == 0 else max(sx, cy),
    }


@dataclass(slots=True)
class ClientRecord:
    name: str
    protocol: str
    login: str
    client_port: int | None = None
    server_port: int | None = None
    connect_command: str | None = None
    accept_version: str | None = None
    heart_beat_asked: list[int] | None = None
    connected: bool = False
    version_header: str | None = None
    server_header: str | None = None
    session_header: str | None = None
    heart_beat_granted: list[int] | None = None
    frames_sent: Counter[str] = field(default_factory=Counter)
    frames_received: Counter[str] = field(default_factory=Counter)
    heart_beats_sent: int = 0
    heart_beats_received: int = 0
    messages_received: list[dict[str, Any]] = field(default_factory=list)
    ack_ids_sent: list[str] = field(default_factory=list)
    nack_ids_sent: list[str] = field(default_factory=list)
    transactions: list[dict[str, str]] = field(default_factory=list)
    receipts_requested: list[str] = field(default_factory=list)
    receipts_received: list[str] = field(default_factory=list)
    errors_received: list[dict[str, Any]] = field(default_factory=list)
    socket_closed: bool = False
    ending: str = "open"
    # "websocket": STOMP over RFC 6455 (stomp.py WSStompConnection); the ws_* keys are then set
    transport: str = "tcp"
    ws_path: str | None = None
    ws_origin: str | None = None
    ws_user_agent: str | None = None

    def to_json(self) -> dict[str, Any]:
        version = self.version_header or ("1.0" if self.connected else None)
        websocket = (
            {
                "transport": self.transport,
                "ws_path": self.ws_path,
                "ws_origin": self.ws_origin,
                "ws_user_agent": self.ws_user_agent,
            }
            if self.transport == "websocket"
            else {}
        )
        return {
            "name": self.name,
            **websocket,
            "client_port": self.client_port,
            "server_port": self.server_port,
            "stomp_py_protocol": self.protocol,
            "connect_command": self.connect_command,
            "accept_version": self.accept_version,
            "login": self.login,
            "connected": self.connected,
            "version_header": self.version_header,
            "version": version,
            "server": self.server_header,
            "session": self.session_header,
            "heart_beat_asked": self.heart_beat_asked,
            "heart_beat_granted": self.heart_beat_granted,
            "heart_beat_effective": effective_heart_beats(
                self.heart_beat_asked, self.heart_beat_granted
            )
            if self.connected
            else None,
            "frames_sent": dict(sorted(self.frames_sent.items())),
            "frames_received": dict(sorted(self.frames_received.items())),
            "heart_beats_sent": self.heart_beats_sent,
            "heart_beats_received": self.heart_beats_received,
            "message_ids_received": [m["message_id"] for m in self.messages_received],
            "messages_received": self.messages_received,
            "ack_ids_sent": self.ack_ids_sent,
            "nack_ids_sent": self.nack_ids_sent,
            "transactions": self.transactions,
            "receipts_requested": self.receipts_requested,
            "receipts_received": self.receipts_received,
            "errors_received": self.errors_received,
            "ending": self.ending,
        }


class RecordingListener(stomp.ConnectionListener):
    """Fills a ClientRecord from stomp.py's hooks; thread-safe reads via `wait_until`."""

    def __init__(self, record: ClientRecord, transport: Any) -> None:
        self.record = record
        self.transport = transport
        self.escaped = record.protocol != "1.0"
        self.changed = threading.Condition()

    def wait_until(self, predicate: Callable[[ClientRecord], bool], timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        with self.changed:
            while not predicate(self.record):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"{self.record.name}: condition not met in {timeout} s")
                self.changed.wait(remaining)

    def on_connecting(self, host_and_port: tuple[str, int]) -> None:
        # WSStompConnection's socket is a websocket-client WebSocket around the TCP socket
        raw = getattr(self.transport.socket, "sock", self.transport.socket)
        local = raw.getsockname()
        with self.changed:
            self.record.client_port = local[1]
            self.record.server_port = host_and_port[1]

    def on_send(self, frame: Frame) -> None:
        with self.changed:
            if frame.cmd is None:
                self.record.heart_beats_sent += 1
                return
            self.record.frames_sent[frame.cmd] += 1
            headers = dict(frame.headers)
            if frame.cmd in CONNECT_COMMANDS:
                self.record.connect_command = frame.cmd
                self.record.accept_version = headers.get("accept-version")
                self.record.heart_beat_asked = parse_heart_beat(headers.get("heart-beat"))
                return
            if self.escaped:
                headers = {key: unescape_header(str(val)) for key, val in headers.items()}
            if "receipt" in headers:
                self.record.receipts_requested.append(str(headers["receipt"]))
            ack_id = headers.get("id") if self.record.protocol == "1.2" else None
            ack_id = ack_id or headers.get("message-id")
            if frame.cmd == "ACK":
                self.record.ack_ids_sent.append(str(ack_id))
            elif frame.cmd == "NACK":
                self.record.nack_ids_sent.append(str(ack_id))
            elif frame.cmd in ("BEGIN", "COMMIT", "ABORT"):
                self.record.transactions.append(
                    {"command": frame.cmd, "transaction": str(headers.get("transaction"))}
                )

    def on_connected(self, frame: Frame) -> None:
        with self.changed:
            self.record.frames_received["CONNECTED"] += 1
            self.record.connected = True
            self.record.version_header = frame.headers.get("version")
            self.record.server_header = frame.headers.get("server")
            self.record.session_header = frame.headers.get("session")
            self.record.heart_beat_granted = parse_heart_beat(frame.headers.get("heart-beat"))
            self.changed.notify_all()

    def on_message(self, frame: Frame) -> None:
        headers = frame.headers
        with self.changed:
            self.record.frames_received["MESSAGE"] += 1
            self.record.messages_received.append(
                {
                    "message_id": headers.get("message-id"),
                    "destination": headers.get("destination"),
                    "subscription": headers.get("subscription"),
                    "ack": headers.get("ack"),
                    "body_length": len(frame.body or b""),
                }
            )
            self.changed.notify_all()

    def on_receipt(self, frame: Frame) -> None:
        with self.changed:
            self.record.frames_received["RECEIPT"] += 1
            self.record.receipts_received.append(frame.headers.get("receipt-id", ""))
            self.changed.notify_all()

    def on_error(self, frame: Frame) -> None:
        with self.changed:
            self.record.frames_received["ERROR"] += 1
            self.record.errors_received.append(
                {
                    "message": frame.headers.get("message"),
                    "receipt_id": frame.headers.get("receipt-id"),
                }
            )
            self.changed.notify_all()

    def on_heartbeat(self) -> None:
        with self.changed:
            self.record.heart_beats_received += 1
            self.changed.notify_all()

    def on_disconnected(self) -> None:
        with self.changed:
            self.record.socket_closed = True
            self.changed.notify_all()


WS_PATH = "/ws"  # RabbitMQ web-stomp's endpoint
WS_USER_AGENT = "stomp-lake-sample stomp.py"

CONNECTION_CLASSES: dict[str, type] = {
    "1.0": stomp.Connection10,
    "1.1": stomp.Connection11,
    "1.2": stomp.Connection12,
}


@dataclass(slots=True)
class RecordedConnection:
    """A stomp.py connection plus the listener recording it."""

    conn: Any
    listener: RecordingListener
    broker: Broker

    @property
    def record(self) -> ClientRecord:
        return self.listener.record

    def wait_until(self, predicate: Callable[[ClientRecord], bool], timeout: float = 15.0) -> None:
        self.listener.wait_until(predicate, timeout)

    def wait_messages(self, count: int, timeout: float = 15.0) -> None:
        self.wait_until(lambda r: len(r.messages_received) >= count, timeout)

    def wait_receipt(self, receipt: str, timeout: float = 15.0) -> None:
        self.wait_until(lambda r: receipt in r.receipts_received, timeout)

    def wait_errors(self, count: int, timeout: float = 15.0) -> None:
        self.wait_until(lambda r: len(r.errors_received) >= count, timeout)

    def wait_closed_by_server(self, timeout: float = 15.0) -> None:
        self.wait_until(lambda r: r.socket_closed, timeout)
        self.record.ending = "server-close"

    def disconnect(self) -> None:
        receipt = f"{self.record.name}-bye"
        self.conn.disconnect(receipt=receipt)
        if self.record.transport == "websocket":
            # RabbitMQ web-stomp 3.10 closes the WebSocket without answering the receipt
            self.wait_until(lambda r: r.socket_closed, 10)
            self.record.ending = "disconnect-unanswered"
        else:
            self.wait_until(lambda r: receipt in r.receipts_received, 10)
            self.record.ending = "disconnect"


def open_connection(
    broker: Broker,
    name: str,
    protocol: str,
    *,
    login: str | None = None,
    passcode: str | None = None,
    heart_beats: tuple[int, int] = (0, 0),
    connect_command: str | None = None,
    send_accept_version: bool = True,
    websocket: bool = False,
) -> RecordedConnection:
    """Connect with stomp.py and wait for CONNECTED (or ERROR when the login is refused).

    `send_accept_version=False` (1.0 only) sends a bare CONNECT, as pre-1.1 clients do.
    `connect_command="CONNECT"` makes 1.1/1.2 use CONNECT instead of stomp.py's default STOMP.
    `websocket=True` (1.2 only) connects with stomp.py's WSStompConnection to the broker's
    web-stomp port, path /ws.
    """
    kwargs: dict[str, Any] = {"auto_decode": False}
    if protocol != "1.0":
        # A generous receive scale so a late broker beat never makes stomp.py hang up.
        kwargs.update(vhost=broker.vhost, heartbeats=heart_beats, heart_beat_receive_scale=4.0)
    login = broker.login if login is None else login
    passcode = broker.passcode if passcode is None else passcode
    record = ClientRecord(name=name, protocol=protocol, login=login)
    if websocket:
        if protocol != "1.2" or broker.web_port is None:
            raise ValueError("WebSocket: stomp.py speaks 1.2 only, to a broker with a web port")
        record.transport, record.ws_path = "websocket", WS_PATH
        # websocket-client sends Origin: http://host:port itself
        record.ws_origin = f"http://{broker.host}:{broker.web_port}"
        record.ws_user_agent = WS_USER_AGENT
        conn = stomp.WSStompConnection(
            [(broker.host, broker.web_port)],
            ws_path=WS_PATH,
            header=[f"User-Agent: {WS_USER_AGENT}"],
            **kwargs,
        )
    else:
        conn = CONNECTION_CLASSES[protocol]([broker.address], **kwargs)
    listener = RecordingListener(record, None)
    listener.transport = conn.transport
    conn.set_listener("recorder", listener)
    recorded = RecordedConnection(conn, listener, broker)
    if not send_accept_version:
        conn.transport.start()
        conn.send_frame("CONNECT", {"login": login, "passcode": passcode})
    elif protocol == "1.0":
        conn.connect(login, passcode)
    else:
        conn.connect(login, passcode, with_connect_command=connect_command == "CONNECT")
    recorded.wait_until(lambda r: r.connected or bool(r.errors_received))
    return recorded
