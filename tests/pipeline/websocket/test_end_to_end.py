"""`stomp-lake run` over the real WebSocket capture: the validated, committed Delta tables hold
what the reference path makes of it (tests/pipeline/websocket/test_real_captures.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from deltalake import DeltaTable

from tests.pipeline.websocket.replay import replay
from tests.pipeline.websocket.test_real_captures import RECORD, WEB_STOMP
from tests.support import pcapgen as g
from tests.support.paths import REPO

pytestmark = pytest.mark.spark
STOMP_LAKE = REPO / ".venv" / "bin" / "stomp-lake"


def _table(lake: Path, name: str) -> list[dict]:
    return DeltaTable(str(lake / "tables" / name)).to_pyarrow_table().to_pylist()


def test_run_commits_websocket_sessions_and_controls(tmp_path: Path) -> None:
    inbox, lake = tmp_path / "in", tmp_path / "lake"
    inbox.mkdir()
    shutil.copy(WEB_STOMP, inbox / WEB_STOMP.name)
    done = subprocess.run(
        [str(STOMP_LAKE), "run", "--input", str(inbox), "--lake", str(lake)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr  # the validation gate passed
    sessions = _table(lake, "sessions")
    assert len(sessions) == len(RECORD["connections"])
    assert {s["transport"] for s in sessions} == {"websocket"}
    assert sorted(s["ws_status"] for s in sessions) == [101, 101, 101, 101, 404]
    assert {s["end_reason"] for s in sessions} >= {"websocket_close"}
    reference = replay(WEB_STOMP)
    for table in ("frames", "messages", "acks", "heartbeats", "receipts", "websocket_controls"):
        assert len(_table(lake, table)) == len(reference[table]), table
    pongs = [c for c in _table(lake, "websocket_controls") if c["kind"] == "pong"]
    assert pongs and all(c["rtt_ms"] is not None for c in pongs)
    kinds = {(a["source"], a["kind"]) for a in _table(lake, "anomalies")}
    assert ("websocket", "websocket_upgrade_refused") in kinds


def test_run_decodes_undecided_upgrades_as_tcp_with_an_anomaly(tmp_path: Path) -> None:
    """An upgrade whose request head never ends while the server sends, and one never answered
    while the client sends many small packets: each is one anomaly, then STOMP over TCP."""
    message = b"MESSAGE\ndestination:/q/a\nmessage-id:m\nsubscription:0\n\n" + b"x" * 100 + b"\x00"
    send = b"SEND\ndestination:/q/a\n\n" + b"x" * 140 + b"\x00"
    head = b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    unfinished = [g.Chunk(True, head)] + [g.Chunk(False, message)] * 1000  # 2x 64 KiB and more
    unanswered = [g.Chunk(True, head + b"\r\n")] + [g.Chunk(True, send)] * 1000
    later = g.DEFAULT_START_NS + 10**12
    conversations = [
        g.Conversation(("10.0.0.1", 40001), ("10.0.0.2", 61613), unfinished),
        g.Conversation(("10.0.0.1", 40002), ("10.0.0.2", 61613), unanswered, start_ns=later),
    ]
    inbox, lake = tmp_path / "in", tmp_path / "lake"
    inbox.mkdir()
    g.write_pcap(inbox / "undecided.pcap", g.generate(conversations).packets)
    done = subprocess.run(
        [str(STOMP_LAKE), "run", "--input", str(inbox), "--lake", str(lake)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    sessions = {s["client_port"]: s for s in _table(lake, "sessions")}
    assert {s["transport"] for s in sessions.values()} == {"tcp"}
    assert sessions[40001]["s2c_bytes"] == 1000 * len(message)
    assert sessions[40002]["c2s_bytes"] == len(head) + 2 + 1000 * len(send)
    by_session = {s["session_id"]: port for port, s in sessions.items()}
    anomalies = [
        by_session[a["session_id"]]
        for a in _table(lake, "anomalies")
        if a["kind"] == "websocket_upgrade_unfinished"
    ]
    assert sorted(anomalies) == [40001, 40002]
    frames = [(by_session[f["session_id"]], f["command"]) for f in _table(lake, "frames")]
    assert frames.count((40001, "MESSAGE")) == 1000
    assert frames.count((40002, "SEND")) == 999  # the first ran into the request head
