"""`stomp-lake run` over the real WebSocket capture: the validated, committed Delta tables hold
what the reference path makes of it (tests/pipeline/websocket/test_real_captures.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from deltalake import DeltaTable

from tests.conftest import REPO
from tests.pipeline.websocket.replay import replay
from tests.pipeline.websocket.test_real_captures import RECORD, WEB_STOMP

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
