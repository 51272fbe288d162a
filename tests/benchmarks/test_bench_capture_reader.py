from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_benchmark_runs_and_writes_both_reports(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "benchmarks.bench_capture_reader", "--out", str(tmp_path)]
    command += ["--conversations", "2", "--messages", "20", "--repeat", "2"]
    subprocess.run(command, cwd=ROOT, check=True, capture_output=True, timeout=300)
    result = json.loads((tmp_path / "capture_reader.json").read_text())
    assert result["packets"] > 50
    rows = result["rows"]
    assert {"ours_pcap", "ours_pcapng", "dpkt_pcap", "dpkt_pcapng"} <= set(rows)
    assert all(row["seconds"] > 0 for row in rows.values())
    assert result["speedup_vs_dpkt"]["pcap"] > 1
    report = (tmp_path / "capture_reader.md").read_text()
    assert "Speed-up over dpkt" in report and "| ours_pcap |" in report
