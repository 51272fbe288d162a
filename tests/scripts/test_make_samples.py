from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))  # scripts/ modules import each other by bare name

from make_samples import SAMPLES, make_sample  # noqa: E402

from tests.support.brokers import free_port  # noqa: E402

pytestmark = [pytest.mark.broker, pytest.mark.slow]


def test_a_sample_is_reproducible_end_to_end(tmp_path: Path) -> None:
    spec = next(s for s in SAMPLES if s.name == "activemq-queues-acks")
    capture = make_sample(spec, tmp_path, free_port())
    record = json.loads((tmp_path / "activemq-queues-acks.expected.json").read_text())
    bundled = json.loads((ROOT / "samples" / "activemq-queues-acks.expected.json").read_text())
    assert capture.name == record["file"]
    assert record["totals"] == bundled["totals"]
    versions = [c["version"] for c in record["connections"]]
    assert versions == ["1.2", "1.1", "1.2", None]
    assert record["connections"][3]["ending"] == "server-close"


def test_the_websocket_sample_is_reproducible_end_to_end(tmp_path: Path) -> None:
    spec = next(s for s in SAMPLES if s.name == "rabbitmq-websocket")
    make_sample(spec, tmp_path, free_port())  # checked against the capture (RFC 6455 read)
    record = json.loads((tmp_path / "rabbitmq-websocket.expected.json").read_text())
    bundled = json.loads((ROOT / "samples" / "rabbitmq-websocket.expected.json").read_text())
    assert record["totals"] == bundled["totals"]
    assert {c["transport"] for c in record["connections"]} == {"websocket"}
    assert {c["ending"] for c in record["connections"]} == {"disconnect-unanswered"}
