"""Real STOMP-over-WebSocket captures (RabbitMQ 3.10 rabbitmq_web_stomp, tcpdump on loopback;
tests/data/websocket, made by scripts/make_websocket_captures.py) against their clients' own
records: reassembled by the reference path, de-framed by the transport, modelled as sessions,
and once more through the connection driver that `stomp-lake run` uses."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from pipeline.driver import ConnectionDriver, DriverConfig
from pipeline.ingest.reader import CaptureReader
from pipeline.ingest.records import TcpPacket
from pipeline.net import flow_ends
from pipeline.session.rows import TableRow
from schemas import TABLES, load
from tests.pipeline.websocket.replay import Rows, commands, replay

DATA = Path(__file__).resolve().parents[2] / "data" / "websocket"
WEB_STOMP = DATA / "rabbitmq-web-stomp.pcap"
RECORD = json.loads((DATA / "rabbitmq-web-stomp.record.json").read_text())


@pytest.fixture(scope="module")
def rows() -> Rows:
    return replay(WEB_STOMP)


def _sessions(rows: Rows) -> list[TableRow]:
    return sorted(rows["sessions"], key=lambda s: s["started_at_ns"])


def _of(rows: Rows, table: str, session: TableRow) -> list[TableRow]:
    return [r for r in rows[table] if r["session_id"] == session["session_id"]]


def _sent(record: dict) -> dict[str, int]:
    # stompjs logs a SEND with a binary body as its ArrayBuffer
    sent: Counter[str] = Counter()
    for command, count in record["sent"].items():
        sent["SEND" if command.startswith("[object") else command] += count
    return dict(sent)


def test_one_session_per_connection_all_websocket(rows: Rows) -> None:
    sessions = _sessions(rows)
    assert len(sessions) == len(RECORD["connections"]) == 5
    assert {s["transport"] for s in sessions} == {"websocket"}
    assert all(s["server_port"] == RECORD["port"] for s in sessions)
    for table in TABLES:
        load(table).arrow_table([{**row, "batch_id": "b"} for row in rows[table]])


def test_stomp_py_ws_connection_matches_its_record(rows: Rows) -> None:
    session, record = _sessions(rows)[0], RECORD["connections"][0]
    assert session["ws_path"] == "/ws" and session["ws_status"] == 101
    assert session["ws_subprotocols_offered"] is None and session["ws_subprotocol"] is None
    assert session["violations"] == 0, _of(rows, "anomalies", session)
    assert commands(rows, session["session_id"], "c2s") == record["sent"]
    assert commands(rows, session["session_id"], "s2c") == record["received"]
    assert session["c2s_heartbeats"] == record["heart_beats_sent"]
    assert session["s2c_heartbeats"] == record["heart_beats_received"]
    assert session["version"] == "1.2" and session["heartbeat_c2s_ms"] is not None
    delivered = [m for m in _of(rows, "messages", session) if m["command"] == "MESSAGE"]
    assert [m["message_id"] for m in delivered] == record["message_ids"]
    outcome = {m["ack_id"] or m["message_id"]: m["ack_outcome"] for m in delivered}
    assert {k for k, v in outcome.items() if v == "ACK"} == set(record["acked"])
    assert {k for k, v in outcome.items() if v == "NACK"} == set(record["nacked"])
    answered = {
        r["receipt_id"] for r in _of(rows, "receipts", session) if r["outcome"] == "receipt"
    }
    assert answered == set(record["receipts"])
    assert all(a["latency_ms"] >= 0 for a in _of(rows, "acks", session))
    frames = _of(rows, "frames", session)
    assert all(f["tcp_offset"] > f["stream_offset"] for f in frames)  # the upgrade comes first


@pytest.mark.parametrize("index", [1, 2])
def test_stompjs_with_and_without_permessage_deflate(rows: Rows, index: int) -> None:
    session, record = _sessions(rows)[index], RECORD["connections"][index]
    assert session["ws_subprotocol"] == "v12.stomp"
    assert session["ws_subprotocols_offered"] == "v12.stomp,v11.stomp,v10.stomp"
    assert session["ws_user_agent"] == "stomp-lake-test stompjs"
    assert session["ws_origin"] == "http://localhost:8000"
    deflate = record["permessage_deflate"]
    assert (session["ws_extensions"] or "").startswith("permessage-deflate") is deflate
    assert commands(rows, session["session_id"], "c2s") == _sent(record)
    delivered = [
        m["message_id"] for m in _of(rows, "messages", session) if m["command"] == "MESSAGE"
    ]
    assert set(record["message_ids"]) <= set(delivered)
    acks = {a["ack_id"]: a["command"] for a in _of(rows, "acks", session)}
    assert {k for k, v in acks.items() if v == "ACK"} == set(record["acked"])
    assert {k for k, v in acks.items() if v == "NACK"} == set(record["nacked"])
    # RabbitMQ puts the binary body's MESSAGE in a text frame; the client fails the connection
    # with 1007 (invalid payload data) and never sends DISCONNECT
    kinds = [(a["direction"], a["kind"]) for a in _of(rows, "anomalies", session)]
    assert kinds == [("s2c", "websocket_invalid_utf8")]
    assert (session["ws_close_code"], session["ws_closed_by"]) == (1007, "client")
    assert session["end_reason"] == "websocket_close"


def test_fragmenting_client_with_pings_between_fragments(rows: Rows) -> None:
    session, record = _sessions(rows)[3], RECORD["connections"][3]
    assert commands(rows, session["session_id"], "c2s") == record["sent"]
    assert commands(rows, session["session_id"], "s2c") == record["received"]
    assert session["violations"] == 0
    controls = _of(rows, "websocket_controls", session)
    pings = [c for c in controls if c["kind"] == "ping"]
    pongs = [c for c in controls if c["kind"] == "pong"]
    assert len(pings) == len(pongs) == record["pings_sent"]
    assert all(p["side"] == "client" for p in pings) and all(p["side"] == "server" for p in pongs)
    assert all(p["rtt_ms"] is not None and p["rtt_ms"] >= 0 for p in pongs)
    closes = [(c["side"], c["close_code"]) for c in controls if c["kind"] == "close"]
    assert closes[0] == ("server", 1000)  # RabbitMQ closes after DISCONNECT's RECEIPT


def test_refused_upgrade(rows: Rows) -> None:
    session, record = _sessions(rows)[4], RECORD["connections"][4]
    assert session["ws_status"] == record["status"] == 404
    assert session["ws_path"] == record["path"]
    assert _of(rows, "frames", session) == []
    assert [a["kind"] for a in _of(rows, "anomalies", session)] == ["websocket_upgrade_refused"]


def test_non_stomp_subprotocol_is_recorded_and_not_decoded() -> None:
    rows = replay(DATA / "rabbitmq-web-mqtt.pcap")
    record = json.loads((DATA / "rabbitmq-web-mqtt.record.json").read_text())
    (session,) = rows["sessions"]
    assert session["ws_subprotocol"] == record["connections"][0]["subprotocol"] == "mqtt"
    assert rows["frames"] == []
    assert [a["kind"] for a in rows["anomalies"]] == ["websocket_not_stomp"]


def _through_driver(path: Path) -> Rows:
    drivers: dict[tuple, ConnectionDriver] = {}
    out: Rows = {name: [] for name in TABLES}
    with CaptureReader(str(path)) as reader:
        for item in reader:
            if type(item) is not TcpPacket:
                continue
            key = flow_ends(item.src_ip, item.src_port, item.dst_ip, item.dst_port)
            driver = drivers.setdefault(key, ConnectionDriver(DriverConfig(close_open=True)))
            driver.packet(item, reader.payload(item), (str(path), item.record_offset))
    for driver in drivers.values():
        driver.end()
        for table, drained in driver.drain().items():
            out[table].extend(drained)
    return out


def test_the_connection_driver_gives_the_same_tables(rows: Rows) -> None:
    driven = _through_driver(WEB_STOMP)
    for table in ("sessions", "frames", "messages", "acks", "heartbeats", "websocket_controls"):
        assert len(driven[table]) == len(rows[table]), table
    assert {s["transport"] for s in driven["sessions"]} == {"websocket"}
    key = lambda f: (f["session_id"], f["frame_index"])  # noqa: E731
    assert sorted(map(key, driven["frames"])) == sorted(map(key, rows["frames"]))
    assert [a["kind"] for a in driven["anomalies"]] == [a["kind"] for a in rows["anomalies"]]
    assert all(a["file"] == str(WEB_STOMP) for a in driven["anomalies"])


def test_the_flow_runner_of_the_spark_pass_gives_the_same_tables(rows: Rows) -> None:
    from pipeline.spark.flows import FlowPassConfig, FlowRunner
    from pipeline.spark.pieces import PieceBuilder
    from tests.support.flow_rows import SunkRows

    builder = PieceBuilder(0)
    with CaptureReader(str(WEB_STOMP)) as reader:
        for item in reader:
            if type(item) is TcpPacket:
                builder.add(item)
    held = SunkRows()
    runner = FlowRunner(FlowPassConfig((str(WEB_STOMP),), close_open=True), held)
    for piece in builder.pieces():
        runner.feed_piece(piece)
    runner.close()
    counts = {kind: len(drained) for kind, drained, _ in held.items()}
    for table in ("sessions", "frames", "messages", "acks", "heartbeats", "websocket_controls"):
        assert counts.get(table, 0) == len(rows[table]), table
