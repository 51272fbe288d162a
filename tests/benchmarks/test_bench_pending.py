"""The lagging-consumer benchmark runs standalone and writes its results files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_benchmark_runs_on_a_tiny_size(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "benchmarks.bench_pending", "--messages", "3000"]
    command += ["--lag", "2000", "--in-memory", "100", "--out", str(tmp_path)]
    subprocess.run(command, cwd=REPO, check=True, capture_output=True, timeout=300)
    report = json.loads((tmp_path / "pending.json").read_text())
    in_memory, spilled, carried = report["cases"]
    assert in_memory["case"] == "rows in memory" and spilled["case"] == "rows spilled past 100"
    assert carried["case"] == "rows spilled past 100, carried to a next run"
    for case in (in_memory, spilled, carried):
        assert case["frames"] == 3 + 3000 + 1000 and case["unsettled_at_end"] == 2000
    assert carried["state_rows"] == 2  # the pickle, then the spilled rows (under 8 MB)
    assert "| rows spilled past 100 |" in (tmp_path / "pending.md").read_text()
