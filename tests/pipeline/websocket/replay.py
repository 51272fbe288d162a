"""Test helper: a real capture's reassembled streams (tests/support/local_reassembly.py, the
single-process reference path) through the WebSocket transport into session models."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from pipeline.net import Direction
from pipeline.reassembly import Closed, Data, Gap, Opened, Segment
from pipeline.session import Endpoint, SessionModel
from pipeline.session.rows import TableRow
from pipeline.websocket import Transport, apply
from schemas import TABLES
from tests.support.local_reassembly import LocalReassembly

Rows = dict[str, list[TableRow]]


def replay(path: Path, broker_ports: tuple[int, ...] = ()) -> Rows:
    rows: Rows = {name: [] for name in TABLES}
    live: dict[str, tuple[SessionModel, Transport]] = {}

    def collect(model: SessionModel) -> None:
        for name, drained in model.drain().items():
            rows[name].extend(drained)

    for event in LocalReassembly([str(path)], broker_ports=broker_ports):
        if type(event) is Opened:
            conn = event.connection
            model = SessionModel(
                conn.connection_id,
                Endpoint(conn.client_ip, conn.client_port),
                Endpoint(conn.server_ip, conn.server_port),
                mid_stream=conn.role_source not in ("syn", "syn_ack"),
            )
            live[conn.connection_id] = (model, Transport(mid_stream=model._mid_stream))
        elif type(event) is Segment:
            model, transport = live[event.connection_id]
            direction = Direction.of(event.from_client)
            inner = event.event
            if type(inner) is Data:
                events = transport.receive(direction, inner.ts_ns, inner.offset, inner.data)
                apply(model, events)
            elif type(inner) is Gap:
                apply(
                    model, transport.receive_gap(direction, inner.ts_ns, inner.offset, inner.size)
                )
            collect(model)
        elif type(event) is Closed:
            model, transport = live.pop(event.connection.connection_id)
            conn = event.connection
            for direction, end in (
                (Direction.C2S, conn.client_end),
                (Direction.S2C, conn.server_end),
            ):
                if end != "none":
                    apply(model, transport.receive_eof(direction, conn.last_ts_ns))
                    model.on_close(direction, conn.last_ts_ns, end)
            apply(model, transport.finish(conn.last_ts_ns))
            model.finish(conn.last_ts_ns, None if conn.closed else "capture_end")
            collect(model)
    return rows


def commands(rows: Rows, session_id: str, direction: str) -> dict[str, int]:
    return dict(
        Counter(
            f["command"]
            for f in rows["frames"]
            if f["session_id"] == session_id and f["direction"] == direction
        )
    )
