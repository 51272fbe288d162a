from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.bench_proxy import PATTERN_WORDS, check_chunk, pattern

REPO = Path(__file__).resolve().parents[2]


def test_the_offset_pattern_catches_a_lost_byte() -> None:
    data = pattern()
    start = 8 * (PATTERN_WORDS - 3) + 5  # across the pattern's wrap-around
    chunk = memoryview(bytes(data[start : start + 1000]))
    assert check_chunk(chunk, 1000, start)
    assert not check_chunk(chunk, 1000, start + 1)
    shifted = memoryview(bytes(data[start + 1 : start + 1001]))
    assert not check_chunk(shifted, 1000, start)
    assert check_chunk(memoryview(b"1234567"), 7, 3)  # too short to hold a whole word


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("socat") is None, reason="socat (Debian package) missing")
def test_a_tiny_benchmark_run_writes_its_results(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_proxy", "--gb", "0.02", "--repeat", "1",
         "--latency-messages", "200", "--connections", "30", "--hold", "0.2",
         "--out", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads((tmp_path / "proxy.json").read_text())
    assert figures["bytes_each_way"] == 20_000_000
    assert set(figures["bulk_best_mb_per_s"]) == {
        "direct", "socat", "socat -b 262144",
        "stomp-capture, no capture", "stomp-capture, capture on",
        "stomp-capture, capture on, --capture-mode drop",
    }
    targets = figures["targets"]
    assert targets["no_byte_lost"] and targets["capture_complete"]
    assert targets["all_connections_captured"]
    held = figures["held_connections"]
    assert held["alive_after_hold"] == held["held_at_once"] == 30
    assert held["proxy_open_fds"] > 60 and held["proxy_rss_mb"] > 0
    assert figures["disk"]["best_mb_per_s"] > 0 and figures["disk"]["share_until_on_disk"] > 0
    assert figures["latency"]["stomp-capture"]["messages"] == 200
    markdown = (tmp_path / "proxy.md").read_text()
    assert "## Targets" in markdown and "stomp-capture, capture on" in markdown
    assert "against the disk's write speed" in markdown
