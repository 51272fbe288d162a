"""Port reuse end to end: two connections on one 4-tuple with the same initial sequence numbers,
back to back (a client binding its local port again through a proxy that gives every connection
the same ISNs), run through the real `stomp-lake run`: two sessions, every frame of each."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from deltalake import DeltaTable

from tests.support import pcapgen as g
from tests.support.paths import REPO

pytestmark = pytest.mark.spark

MESSAGES = 4


def _conversations() -> list[g.Conversation]:
    first = g.stomp_conversation(0, messages=MESSAGES, body_size=200)
    second = g.stomp_conversation(1, messages=MESSAGES, body_size=300)
    second.client, second.server = first.client, first.server
    second.client_isn, second.server_isn = first.client_isn, first.server_isn
    second.start_ns = first.start_ns + 2 * 10**9  # after the first one's FIN both ways
    return [first, second]


def _rows(lake: Path, table: str) -> list[dict]:
    path = lake / "tables" / table
    if not (path / "_delta_log").is_dir():
        return []
    return DeltaTable(str(path)).to_pyarrow_table().to_pylist()


def test_two_connections_on_one_tuple_with_the_same_isn_are_two_whole_sessions(
    tmp_path: Path,
) -> None:
    inbox = tmp_path / "in"
    inbox.mkdir()
    g.write_pcap(inbox / "reuse.pcap", g.generate(_conversations()).packets)
    lake = tmp_path / "lake"
    env = dict(os.environ, PYTHONPATH=str(REPO), STOMP_LAKE_WORK=str(tmp_path / "work"))
    command = [sys.executable, "-m", "pipeline.cli", "run", "--input", str(inbox)]
    command += ["--lake", str(lake), "--master", "local[1]", "--open-connections", "close"]
    command += ["--no-validate"]
    done = subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]

    sessions = _rows(lake, "sessions")
    assert len(sessions) == 2 and len({s["session_id"] for s in sessions}) == 2
    assert {(s["client_ip"], s["client_port"]) for s in sessions} == {("10.0.0.1", 40000)}
    frames = _rows(lake, "frames")
    expected = Counter({"CONNECT": 1, "CONNECTED": 1, "SUBSCRIBE": 1, "SEND": MESSAGES})
    expected.update({"MESSAGE": MESSAGES, "DISCONNECT": 1, "RECEIPT": 1})
    for session in sessions:
        mine = [f for f in frames if f["session_id"] == session["session_id"]]
        assert Counter(f["command"] for f in mine) == expected
    kinds = Counter(a["kind"] for a in _rows(lake, "anomalies"))
    assert not {kind for kind in kinds if "conflict" in kind}, kinds
