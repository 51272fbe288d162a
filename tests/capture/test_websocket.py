"""`stomp-capture` in front of RabbitMQ web-stomp: real WebSocket clients (stomp.py's
WSStompConnection; @stomp/stompjs in headless Chromium) talk to the broker through the proxy,
and the proxy's capture, ingested, holds what each client sent and received."""

from __future__ import annotations

import dataclasses
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from pipeline.session.rows import TableRow
from tests.pipeline.websocket.replay import Rows, commands, replay
from tests.support.brokers import Broker  # the rabbitmq fixture comes from conftest.py

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))  # scripts/ modules import each other by bare name

from make_websocket_captures import STOMPJS_BUNDLE, WebBroker, stomp_capture, stompjs_chromium  # noqa: E402
from sample_recorder import open_connection  # noqa: E402

from tests.pipeline.report.headless_chromium import find_browser  # noqa: E402

pytestmark = pytest.mark.broker


def _captured(out: Path) -> Rows:
    [capture] = sorted(out.glob("*.pcapng"))  # one file: no rotation in these short runs
    return replay(capture)


def _session(rows: Rows, client_port: int) -> TableRow:
    [session] = [s for s in rows["sessions"] if s["client_port"] == client_port]
    return session


def _of(rows: Rows, table: str, session: TableRow) -> list[TableRow]:
    return [r for r in rows[table] if r["session_id"] == session["session_id"]]


def test_stomp_py_over_websocket_through_the_proxy(rabbitmq: Broker, tmp_path: Path) -> None:
    assert rabbitmq.web_port is not None
    with stomp_capture(rabbitmq.web_port, tmp_path) as port:
        via = dataclasses.replace(rabbitmq, web_port=port)
        client = open_connection(via, "ws-proxy-1.2", "1.2", heart_beats=(500, 500), websocket=True)
        client.conn.subscribe("/queue/ws-proxy", id="s1", ack="client-individual", receipt="sub")
        client.wait_receipt("sub")
        for seq in range(5):
            client.conn.send("/queue/ws-proxy", f"body {seq}", receipt=f"send-{seq}")
        client.wait_messages(5)
        for index, message in enumerate(client.record.messages_received):
            settle = client.conn.nack if index == 2 else client.conn.ack
            settle(message["ack"], receipt="settled" if index == 4 else None)
        client.wait_receipt("settled")
        time.sleep(1.2)  # a beat or two each way (RabbitMQ grants 1000,1000)
        client.disconnect()
    record = client.record.to_json()
    rows = _captured(tmp_path)

    session = _session(rows, record["client_port"])
    assert session["transport"] == "websocket" and session["ws_status"] == 101
    assert session["server_port"] == rabbitmq.web_port  # the broker's port, not the proxy's
    assert session["ws_user_agent"] == record["ws_user_agent"]
    assert session["violations"] == 0, rows["anomalies"]
    sid = session["session_id"]
    assert commands(rows, sid, "c2s") == record["frames_sent"]
    assert commands(rows, sid, "s2c") == record["frames_received"]
    beats = Counter(h["direction"] for h in _of(rows, "heartbeats", session))
    assert (beats["c2s"], beats["s2c"]) == (
        record["heart_beats_sent"],
        record["heart_beats_received"],
    )
    delivered = [m for m in _of(rows, "messages", session) if m["command"] == "MESSAGE"]
    assert [m["message_id"] for m in delivered] == record["message_ids_received"]
    acks = _of(rows, "acks", session)
    assert sorted(a["ack_id"] for a in acks if a["command"] == "ACK") == sorted(
        record["ack_ids_sent"]
    )
    assert [a["ack_id"] for a in acks if a["command"] == "NACK"] == record["nack_ids_sent"]
    receipts = _of(rows, "receipts", session)
    assert {r["receipt_id"] for r in receipts} == set(record["receipts_requested"])
    answered = {r["receipt_id"] for r in receipts if r["outcome"] == "receipt"}
    assert answered == set(record["receipts_received"])
    assert record["ending"] == "disconnect-unanswered"  # web-stomp closes, no RECEIPT
    assert (session["ws_close_code"], session["ws_closed_by"]) == (1000, "server")


@pytest.mark.skipif(find_browser() is None, reason="chromium and chromedriver needed")
@pytest.mark.skipif(not STOMPJS_BUNDLE.is_file(), reason=f"{STOMPJS_BUNDLE} (npm install) missing")
def test_stompjs_in_headless_chromium_through_the_proxy(rabbitmq: Broker, tmp_path: Path) -> None:
    assert rabbitmq.web_port is not None
    with stomp_capture(rabbitmq.web_port, tmp_path) as port:
        record = stompjs_chromium(WebBroker(rabbitmq.stomp_port, port, 0))
    rows = _captured(tmp_path)

    (session,) = rows["sessions"]
    assert (
        session["ws_user_agent"] == record["user_agent"]
        and "HeadlessChrome" in record["user_agent"]
    )
    assert (session["ws_extensions"] or "").startswith("permessage-deflate")
    assert session["violations"] == 0, rows["anomalies"]
    sid = session["session_id"]
    assert commands(rows, sid, "c2s") == record["sent"]
    assert commands(rows, sid, "s2c") == record["received"]
    delivered = [m for m in _of(rows, "messages", session) if m["command"] == "MESSAGE"]
    assert [m["message_id"] for m in delivered] == record["message_ids"]
    acks = _of(rows, "acks", session)
    assert sorted(a["ack_id"] for a in acks if a["command"] == "ACK") == sorted(record["acked"])
    assert sorted(a["ack_id"] for a in acks if a["command"] == "NACK") == sorted(record["nacked"])
    assert session["c2s_heartbeats"] == record["heart_beats_sent"]
    # stompjs counts the LF after each frame's NUL as a PONG too
    received = sum(record["received"].values())
    assert session["s2c_heartbeats"] == record["heart_beats_received"] - received
