"""The WebSocket benchmark runs standalone and writes its results files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_benchmark_runs_on_a_little_traffic(tmp_path: Path) -> None:
    script = REPO / "benchmarks" / "bench_websocket.py"
    argv = [sys.executable, str(script), "--messages", "300", "--repeat", "2"]
    subprocess.run([*argv, "--out", str(tmp_path)], check=True, capture_output=True, timeout=300)
    report = json.loads((tmp_path / "websocket.json").read_text())
    assert report["messages"] == 300 and report["frames"] == 2 * 300 + 3
    assert set(report["paths"]) == {"tcp", "ws", "ws_deflate"}
    for path in report["paths"].values():
        assert len(path["seconds"]["rounds"]) == 2
        assert path["seconds"]["min"] <= path["seconds"]["median"] <= path["seconds"]["max"]
        assert path["stomp_mb_per_s_median"] > 0
    wire = {name: path["wire_bytes"] for name, path in report["paths"].items()}
    assert wire["tcp"] == report["stomp_bytes"] < wire["ws"]
    assert wire["ws_deflate"] < wire["tcp"]  # the JSON bodies compress
    assert set(report["cost_vs_tcp"]) == {"ws", "ws_deflate"}
    assert report["target_cost_vs_tcp"] == 1.5
    assert set(report["rounds_over_target"]) == {"ws", "ws_deflate"}
    markdown = (tmp_path / "websocket.md").read_text()
    assert "| TCP (baseline) |" in markdown and "permessage-deflate" in markdown
