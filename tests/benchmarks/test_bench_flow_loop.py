from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.bench_flow_loop import WAYS

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("shape", "name"), [("broker", "flow_loop"), ("small", "flow_loop-small")])
def test_benchmark_runs_every_way_on_the_same_frames_and_writes_both_reports(
    tmp_path: Path, shape: str, name: str
) -> None:
    command = [sys.executable, "-m", "benchmarks.bench_flow_loop", "--out", str(tmp_path)]
    command += ["--data", str(tmp_path / "data"), "--mb", "2", "--repeat", "1"]
    command += ["--shape", shape]
    subprocess.run(command, cwd=ROOT, check=True, capture_output=True, timeout=300)
    result = json.loads((tmp_path / f"{name}.json").read_text())
    assert result["shape"] == shape
    assert result["frames"] > 0  # the run refuses ways that made different frame counts
    assert set(result["seconds"]) == set(WAYS)
    assert result["compiled_vs_source_modules"] > 0
    report = (tmp_path / f"{name}.md").read_text()
    assert "| source_modules |" in report and "| pure_python |" in report
    assert ("small messages" in report) == (shape == "small")
