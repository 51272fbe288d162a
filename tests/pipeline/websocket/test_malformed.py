"""The WebSocket cases of the malformed corpus (tests/data/malformed, made by
scripts/make_malformed_corpus.py) through the connection driver: each records its anomalies,
nothing raises, no passcode shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.pipeline.websocket.test_real_captures import _through_driver

MALFORMED = Path(__file__).resolve().parents[2] / "data" / "malformed"
EXPECTED = json.loads((MALFORMED / "expected.json").read_text())
CASES = sorted(name for name in EXPECTED if name.startswith("websocket-"))


def test_the_corpus_has_websocket_cases() -> None:
    assert len(CASES) == 4


@pytest.mark.parametrize("name", CASES)
def test_websocket_case_records_its_anomalies(name: str) -> None:
    rows = _through_driver(MALFORMED / name)
    (session,) = rows["sessions"]
    assert session["transport"] == "websocket"
    found = {(a["source"], a["kind"]) for a in rows["anomalies"]}
    assert {(e["source"], e["kind"]) for e in EXPECTED[name]} <= found
    assert all(a["file"] == str(MALFORMED / name) for a in rows["anomalies"])
    assert "S3cret" not in repr(rows)
