"""The decoder benchmark runs standalone and writes its results files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_benchmark_runs_on_a_tiny_size(tmp_path: Path) -> None:
    script = REPO / "benchmarks" / "bench_decoder.py"
    subprocess.run(
        [sys.executable, str(script), "--mb", "0.5", "--repeat", "1", "--out", str(tmp_path)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    report = json.loads((tmp_path / "decoder.json").read_text())
    assert report["traffic_bytes"] >= 500_000
    names = [result["name"] for result in report["results"]]
    assert any(name.startswith("stomp.py") for name in names)
    assert any(name.startswith("stompest") for name in names)
    assert all(result["frames"] == report["frames"] > 0 for result in report["results"])
    assert all(result["mb_per_s"] > 0 for result in report["results"])
    assert set(report["speedup_vs_stomppy"]) == set(names)
    assert any(name.startswith("pure Python") for name in names)
    assert set(report["c_hot_paths_gain"]) == {"headers read", "headers not read"}
    assert "| decoder | MB/s |" in (tmp_path / "decoder.md").read_text()
