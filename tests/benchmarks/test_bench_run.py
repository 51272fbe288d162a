"""The main-job benchmark runs end to end on a tiny capture and writes both reports."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark (Debian package) missing"),
]


def test_a_tiny_run_writes_its_results(tmp_path: Path) -> None:
    command = [
        sys.executable, "-m", "benchmarks.bench_run", "--gb", "0.001", "--connections", "6",
        "--shape", "small", "--target", "3", "--target-conv", "0.5",
        "--data", str(tmp_path / "data"), "--out", str(tmp_path),
    ]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "run.json").read_text())
    (size,) = result["sizes"]
    written = size["capture"]["frames"]
    assert size["ours"]["frames"] == written and size["ours"]["sessions"] == 6
    assert 0 < size["tshark_stomp"]["frames"] <= written
    assert size["ours"]["peak_rss_mb"] > 100 and size["tshark_stomp"]["seconds"] > 0
    # every case twice (the default rounds), the fastest reported
    for case in ("ours", "tshark_stomp", "tshark_conv_tcp"):
        assert len(size[case]["runs_s"]) == 2 and size[case]["seconds"] == min(size[case]["runs_s"])
    assert {"spark_start", "compute", "commit"} <= set(size["ours"]["timings"]) or set(
        size["ours"]["timings"]
    ) == {"run"}
    assert not (tmp_path / "data" / "run-small-0.001gb" / "lake").exists()  # lakes not kept
    assert size["ours"]["frames_per_s"] > 0 and size["tshark_stomp"]["frames_per_s"] > 0
    report = (tmp_path / "run.md").read_text()
    assert report.startswith("# The main job") and "Small-message" in report
    assert "Target: ours at least 3.0x faster" in report
    assert "Target: at least 0.5x `tshark -z conv,tcp`" in report and "frames/s" in report
