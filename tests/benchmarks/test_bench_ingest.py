"""The ingest benchmark runs end to end on a tiny capture and writes both reports."""

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
    pytest.mark.skipif(
        not (shutil.which("tshark") and shutil.which("tcpflow")),
        reason="tshark and tcpflow (Debian packages) are the baselines",
    ),
]


def test_a_tiny_run_writes_its_results(tmp_path: Path) -> None:
    command = [  # the loopback-GSO variant: 64 KiB IP packets
        sys.executable, "-m", "benchmarks.bench_ingest", "--mb", "1", "--files", "3",
        "--connections", "8", "--repeat", "1", "--data", str(tmp_path / "data"),
        "--segment-bytes", "65483",
        "--out", str(tmp_path),
    ]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "ingest-65483b.json").read_text())
    assert result["capture"]["segment_bytes"] == 65483
    assert result["check"]["all_seen"], result["check"]
    rows = result["rows"]
    assert len(rows) == 4 and all(row["seconds"] > 0 for row in rows.values())
    ours = rows["ours (packets_frame + flow_pass, local[*])"]
    phases = {"packets_frame", "flow_pass"}
    assert set(ours["timings"]) == {"spark_start"} | phases | {f"warm_{p}" for p in phases}
    assert ours["cpu_seconds"]["flow_pass"]["java"] > 0
    assert ours["peak_rss_mb"] > 100 and ours["peak_processes"] >= 2  # driver and JVM at least
    assert set(result["time_ratio_to_ours"]) == set(rows) - {next(iter(rows))}
    report = (tmp_path / "ingest-65483b.md").read_text()
    assert "| tcpflow, 1 process |" in report and "Check:" in report
