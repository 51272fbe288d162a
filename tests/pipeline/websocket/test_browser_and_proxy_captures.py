"""Two more real STOMP-over-WebSocket captures of RabbitMQ 3.10 web-stomp (tests/data/websocket,
made by scripts/make_websocket_captures.py) against their clients' own records, through the
reference path and through the connection driver that `stomp-lake run` uses:

- @stomp/stompjs in Debian's headless Chromium, on a page served on localhost, over the
  browser's own WebSocket (permessage-deflate as Chromium offers it), tcpdump on loopback;
- stomp.py's WSStompConnection and stompjs on Node (deflate on and off) through
  `stomp-capture`, the project's proxy: its pcapng is the capture.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.session.rows import TableRow
from tests.pipeline.websocket.replay import Rows, commands, replay
from tests.pipeline.websocket.test_real_captures import _through_driver

DATA = Path(__file__).resolve().parents[2] / "data" / "websocket"
CHROMIUM = DATA / "rabbitmq-web-stomp-chromium.pcap"
PROXY = DATA / "rabbitmq-web-stomp-proxy.pcapng"
TABLES = ("sessions", "frames", "messages", "acks", "heartbeats", "receipts", "websocket_controls")


def _record(capture: Path) -> dict[str, Any]:
    return json.loads(capture.with_suffix(".record.json").read_text())


def _sessions(rows: Rows) -> list[TableRow]:
    return sorted(rows["sessions"], key=lambda s: s["started_at_ns"])


def _of(rows: Rows, table: str, session: TableRow) -> list[TableRow]:
    return [r for r in rows[table] if r["session_id"] == session["session_id"]]


def _delivered(rows: Rows, session: TableRow) -> list[TableRow]:
    return [m for m in _of(rows, "messages", session) if m["command"] == "MESSAGE"]


def _settled(rows: Rows, session: TableRow, command: str) -> list[str]:
    return sorted(a["ack_id"] for a in _of(rows, "acks", session) if a["command"] == command)


@pytest.fixture(scope="module")
def chromium() -> Rows:
    return replay(CHROMIUM)


@pytest.fixture(scope="module")
def proxied() -> Rows:
    return replay(PROXY)


def test_stompjs_in_headless_chromium_matches_its_record(chromium: Rows) -> None:
    (session,) = chromium["sessions"]
    (record,) = _record(CHROMIUM)["connections"]
    assert session["transport"] == "websocket" and session["ws_status"] == 101
    assert session["ws_user_agent"] == record["user_agent"]  # HeadlessChrome/...
    assert session["ws_origin"] == record["page_origin"]  # the page's localhost origin
    assert session["ws_subprotocol"] == "v12.stomp"
    assert (session["ws_extensions"] or "").startswith("permessage-deflate")  # Chromium offers it
    assert session["violations"] == 0, chromium["anomalies"]
    sid = session["session_id"]
    assert commands(chromium, sid, "c2s") == record["sent"]
    assert commands(chromium, sid, "s2c") == record["received"]
    delivered = _delivered(chromium, session)
    assert [m["message_id"] for m in delivered] == record["message_ids"]
    # RabbitMQ requeues the NACKed message and delivers it again under a new id: all settled
    assert {m["ack_outcome"] for m in delivered} == {"ACK", "NACK"}
    assert _settled(chromium, session, "ACK") == sorted(record["acked"])
    assert _settled(chromium, session, "NACK") == sorted(record["nacked"])
    answered = [r["receipt_id"] for r in _of(chromium, "receipts", session)]
    assert [r for r in answered if r in record["receipts"]] == record["receipts"]
    # stompjs' own DISCONNECT receipt (close-N) is never answered: web-stomp closes instead
    unanswered = {r["receipt_id"]: r["outcome"] for r in _of(chromium, "receipts", session)}
    assert [k for k, v in unanswered.items() if v != "receipt"] == ["close-0"]
    assert session["c2s_heartbeats"] == record["heart_beats_sent"]
    # stompjs logs '<<< PONG' for every EOL between frames, the trailing LF RabbitMQ puts
    # after each frame's NUL too: its count is the beats plus the frames received
    received = sum(record["received"].values())
    assert session["s2c_heartbeats"] == record["heart_beats_received"] - received
    closes = [(c["side"], c["close_code"]) for c in _of(chromium, "websocket_controls", session)]
    assert ("server", record["close_code"]) in closes


def test_stomp_py_through_stomp_capture_matches_its_record(proxied: Rows) -> None:
    session, record = _sessions(proxied)[0], _record(PROXY)["connections"][0]
    assert session["transport"] == "websocket" and session["ws_path"] == "/ws"
    # the proxy writes the conversation as client <-> broker: the broker's port, not its own
    assert session["server_port"] == _record(PROXY)["port"] != _record(PROXY)["proxy_port"]
    assert session["violations"] == 0, proxied["anomalies"]
    sid = session["session_id"]
    assert commands(proxied, sid, "c2s") == record["sent"]
    assert commands(proxied, sid, "s2c") == record["received"]
    assert session["c2s_heartbeats"] == record["heart_beats_sent"]
    assert session["s2c_heartbeats"] == record["heart_beats_received"]
    assert [m["message_id"] for m in _delivered(proxied, session)] == record["message_ids"]
    assert _settled(proxied, session, "ACK") == sorted(record["acked"])
    assert _settled(proxied, session, "NACK") == sorted(record["nacked"])
    receipts = _of(proxied, "receipts", session)
    assert {r["receipt_id"] for r in receipts if r["outcome"] == "receipt"} == set(
        record["receipts"]
    )


@pytest.mark.parametrize("index", [1, 2])
def test_stompjs_on_node_through_stomp_capture_matches_its_record(
    proxied: Rows, index: int
) -> None:
    session, record = _sessions(proxied)[index], _record(PROXY)["connections"][index]
    deflate = (session["ws_extensions"] or "").startswith("permessage-deflate")
    assert deflate is record["permessage_deflate"]
    sid = session["session_id"]
    assert commands(proxied, sid, "c2s") == record["sent"]
    delivered = [m["message_id"] for m in _delivered(proxied, session)]
    assert delivered[: len(record["message_ids"])] == record["message_ids"]
    assert _settled(proxied, session, "ACK") == sorted(record["acked"])
    assert _settled(proxied, session, "NACK") == sorted(record["nacked"])
    # as without the proxy: the binary body comes back in a text frame, the client fails the
    # connection with 1007 (its own close event says 1006: no close frame came back)
    assert [a["kind"] for a in _of(proxied, "anomalies", session)] == ["websocket_invalid_utf8"]
    assert (session["ws_close_code"], session["ws_closed_by"]) == (1007, "client")
    assert session["end_reason"] == "websocket_close"


@pytest.mark.parametrize("capture", [CHROMIUM, PROXY], ids=["chromium", "proxy"])
def test_the_connection_driver_gives_the_same_tables(capture: Path) -> None:
    reference, driven = replay(capture), _through_driver(capture)
    for table in TABLES:
        assert len(driven[table]) == len(reference[table]), table
    assert {s["transport"] for s in driven["sessions"]} == {"websocket"}
    key = lambda f: (f["session_id"], f["frame_index"], f["command"])  # noqa: E731
    assert sorted(map(key, driven["frames"])) == sorted(map(key, reference["frames"]))
