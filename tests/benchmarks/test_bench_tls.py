"""The TLS benchmark runs standalone and writes its results files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_benchmark_runs_on_a_little_traffic(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "benchmarks.bench_tls", "--messages", "200", "--repeat", "2"]
    argv += ["--out", str(tmp_path)]
    subprocess.run(argv, cwd=REPO, check=True, capture_output=True, timeout=300)
    report = json.loads((tmp_path / "tls.json").read_text())
    assert report["messages"] == 200 and report["frames"] == 2 * 200 + 3
    assert set(report["paths"]) == {
        "tcp", "tls13_aes128_gcm", "tls13_chacha20", "tls12_aes128_gcm", "tls12_aes128_cbc"
    }  # fmt: skip
    wire = {name: path["wire_bytes"] for name, path in report["paths"].items()}
    assert all(
        wire["tcp"] == report["stomp_bytes"] < size for name, size in wire.items() if name != "tcp"
    )
    assert set(report["cost_vs_tcp"]) == set(report["paths"]) - {"tcp"}
    assert report["target_cost_vs_tcp"] == 1.3
    assert set(report["flow_pass"]) == set(report["paths"])
    assert set(report["flow_pass_cost_vs_tcp"]) == set(report["cost_vs_tcp"])
    markdown = (tmp_path / "tls.md").read_text()
    assert "| TCP (baseline) |" in markdown and "The flow pass" in markdown
