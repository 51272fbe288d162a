"""The compiled parts against their pure-Python twins, end to end: every table of a whole run
without Spark (`fuzz.offline.run_offline`) is the same with the compiled capture scanner, flow
pass loop, session streams and STOMP decoder as with STOMP_LAKE_PURE_PYTHON=1, on every capture
the repository holds (the samples, the malformed corpus, the WebSocket and other real captures,
the capture reader's fuzz regressions)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fuzz.offline import run_offline
from pipeline.compiled import PURE_PYTHON_VARIABLE
from pipeline.ingest.scan import new_scanner
from pipeline.session import streams
from pipeline.spark.packet_loop import feed_packets, packet_loop
from pipeline.stomp import speedups
from tests.conftest import REPO, REPO_CAPTURES


def test_every_compiled_part_is_built() -> None:
    assert new_scanner() is not None and speedups.compiled is not None
    assert packet_loop() is not feed_packets
    assert streams.implementation() is not streams


@pytest.mark.parametrize("path", REPO_CAPTURES, ids=lambda p: str(p.relative_to(REPO)))
def test_same_tables_compiled_and_pure_python(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = run_offline([str(path)], split_bytes=1 + path.stat().st_size // 2)
    monkeypatch.setenv(PURE_PYTHON_VARIABLE, "1")
    monkeypatch.setattr(speedups, "compiled", None)  # the decoder reads it on every scan
    pure = run_offline([str(path)], split_bytes=1 + path.stat().st_size // 2)
    assert pure.tables == compiled.tables
    assert pure.capture_anomalies == compiled.capture_anomalies
    assert pure.packets == compiled.packets
