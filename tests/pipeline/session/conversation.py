"""Test helper: drive a SessionModel with real encoded frames at chosen capture times."""

from __future__ import annotations

import contextlib
import pickle
import socket
import threading
import time
from collections.abc import Iterable
from typing import Any

from pipeline.session import Endpoint, ModelOptions, SessionModel
from pipeline.session.rows import TableRow
from pipeline.stomp import encode_frame
from schemas import TABLES

T0 = 1_700_000_000_000_000_000  # 2023-11-14T22:13:20Z
MS = 1_000_000
CLIENT = Endpoint("10.0.0.1", 40000)
SERVER = Endpoint("10.0.0.2", 61613)

Row = dict[str, Any]


class Conversation:
    """One connection. Times are milliseconds after T0; every call records what it did so the
    same script can be replayed (see ``replay``)."""

    def __init__(
        self, options: ModelOptions | None = None, *, mid_stream: bool = False, version: str = "1.2"
    ) -> None:
        self.model = SessionModel(
            "s1", CLIENT, SERVER, options or ModelOptions(), mid_stream=mid_stream
        )
        self.version = version  # encoding rules for frames after the handshake
        self.offsets = {"c2s": 0, "s2c": 0}
        self.rows: dict[str, list[TableRow]] = {name: [] for name in TABLES}
        self.script: list[tuple[str, tuple[Any, ...]]] = []

    # -- raw input, recorded ----------------------------------------------------------------

    def data(self, direction: str, ms: float, data: bytes, source: tuple[str, int] | None = None):
        self._do("on_data", direction, T0 + int(ms * MS), self.offsets[direction], data, source)
        self.offsets[direction] += len(data)

    def gap(self, direction: str, ms: float, size: int) -> None:
        self._do("on_gap", direction, T0 + int(ms * MS), self.offsets[direction], size)
        self.offsets[direction] += size

    def conflict(self, direction: str, ms: float, offset: int, size: int) -> None:
        self._do("on_conflict", direction, T0 + int(ms * MS), offset, size)

    def close(self, direction: str, ms: float, how: str = "fin") -> None:
        self._do("on_close", direction, T0 + int(ms * MS), how)

    def finish(self, ms: float, reason: str | None = None) -> dict[str, list[TableRow]]:
        self._do("finish", T0 + int(ms * MS), reason)
        return self.drain()

    def drain(self) -> dict[str, list[TableRow]]:
        for name, rows in self.model.drain().items():
            self.rows[name].extend(rows)
        return self.rows

    def _do(self, method: str, *args: Any) -> None:
        self.script.append((method, args))
        getattr(self.model, method)(*args)

    # -- frames -----------------------------------------------------------------------------

    def client(
        self,
        ms: float,
        command: str,
        headers: Iterable[tuple[str, str]] = (),
        body: bytes = b"",
        *,
        trailer: bytes = b"",
        version: str | None = None,
    ) -> bytes:
        frame = encode_frame(command, list(headers), body, version=version or self.version)
        self.data("c2s", ms, frame + trailer)
        return frame

    def server(
        self,
        ms: float,
        command: str,
        headers: Iterable[tuple[str, str]] = (),
        body: bytes = b"",
        *,
        trailer: bytes = b"\n",  # brokers end frames with NUL + LF
        version: str | None = None,
    ) -> bytes:
        frame = encode_frame(command, list(headers), body, version=version or self.version)
        self.data("s2c", ms, frame + trailer)
        return frame

    def handshake(
        self,
        ms: float = 0,
        *,
        accept: str | None = "1.0,1.1,1.2",
        version: str | None = "1.2",
        client_hb: str | None = None,
        server_hb: str | None = None,
        login: str | None = "alice",
        passcode: str | None = "s3cret-pass",
        command: str = "CONNECT",
    ) -> None:
        headers = [("host", "/")]
        if accept is not None:
            headers.append(("accept-version", accept))
        if login is not None:
            headers.append(("login", login))
        if passcode is not None:
            headers.append(("passcode", passcode))
        if client_hb is not None:
            headers.append(("heart-beat", client_hb))
        self.client(ms, command, headers, version="1.2")  # CONNECT is never escaped
        reply = [("session", "sess-1"), ("server", "TestBroker/1.0")]
        if version is not None:
            reply.insert(0, ("version", version))
        if server_hb is not None:
            reply.append(("heart-beat", server_hb))
        self.server(ms + 1, "CONNECTED", reply, version="1.2")

    def subscribe(self, ms: float, sub_id: str, ack: str = "auto", dest: str = "/queue/a") -> None:
        self.client(ms, "SUBSCRIBE", [("id", sub_id), ("destination", dest), ("ack", ack)])

    def message(
        self,
        ms: float,
        sub_id: str,
        message_id: str,
        *,
        ack: str | None = None,
        dest: str = "/queue/a",
        body: bytes = b"payload",
        extra: Iterable[tuple[str, str]] = (),
    ) -> None:
        headers = [("subscription", sub_id), ("message-id", message_id), ("destination", dest)]
        if ack is not None:
            headers.append(("ack", ack))
        self.server(ms, "MESSAGE", [*headers, *extra], body)


def replay(
    script: list[tuple[str, tuple[Any, ...]]], model: SessionModel, pickle_every: int = 0
) -> tuple[SessionModel, dict[str, list[TableRow]]]:
    """Run a recorded script on ``model``; with ``pickle_every`` = n, the model is pickled and
    restored (as a new run would) after every n-th call, draining rows each time."""
    rows: dict[str, list[TableRow]] = {name: [] for name in TABLES}
    for number, (method, args) in enumerate(script, start=1):
        getattr(model, method)(*args)
        if pickle_every and number % pickle_every == 0:
            for name, drained in model.drain().items():
                rows[name].extend(drained)
            model = pickle.loads(pickle.dumps(model))
    for name, drained in model.drain().items():
        rows[name].extend(drained)
    return model, rows


def only(rows: list[TableRow], **match: Any) -> list[TableRow]:
    return [row for row in rows if all(row.get(k) == v for k, v in match.items())]


# ---- real traffic: a loopback relay that records what a real client and broker exchange -----


class RecordingRelay:
    """Accepts one client, relays it to ``upstream`` and records each recv() as a chunk
    (direction, time_ns, bytes), plus ("close", direction) when a side shuts down."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = self.listener.getsockname()[:2]
        self.events: list[tuple[str, int, bytes | str]] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        client, _ = self.listener.accept()
        server = socket.create_connection(self.upstream)
        pumps = [
            threading.Thread(target=self._pump, args=(client, server, "c2s"), daemon=True),
            threading.Thread(target=self._pump, args=(server, client, "s2c"), daemon=True),
        ]
        for pump in pumps:
            pump.start()
        for pump in pumps:
            pump.join()
        client.close()
        server.close()

    def _pump(self, source: socket.socket, sink: socket.socket, direction: str) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            with self._lock:
                self.events.append((direction, time.time_ns(), data or "close"))
            if not data:
                with contextlib.suppress(OSError):
                    sink.shutdown(socket.SHUT_WR)
                return
            sink.sendall(data)

    def wait(self, timeout: float = 10.0) -> list[tuple[str, int, bytes | str]]:
        self._thread.join(timeout)
        self.listener.close()
        with self._lock:
            return list(self.events)


def model_of(events: list[tuple[str, int, bytes | str]], options: ModelOptions | None = None):
    """Feed recorded relay events to a fresh model, finish it and return all rows."""
    model = SessionModel("real", CLIENT, SERVER, options or ModelOptions())
    offsets = {"c2s": 0, "s2c": 0}
    for direction, ts_ns, data in events:
        if data == "close":
            model.on_close(direction, ts_ns, "fin")
        else:
            assert isinstance(data, bytes)  # only the close marker is text
            model.on_data(direction, ts_ns, offsets[direction], data)
            offsets[direction] += len(data)
    model.finish(events[-1][1])
    return model.drain()
