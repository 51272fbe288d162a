"""The gate on the bundled real captures, through the whole run: real traffic (with its protocol
violations) must pass on both validation engines, with the same expectations, and the result
must be recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.commands.run import RunConfig, run
from pipeline.lake import Lake
from pipeline.spark.session import SparkSettings
from pipeline.validation.quarantine import list_quarantined

SAMPLES = Path(__file__).resolve().parents[3] / "samples"

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_real_samples_pass_the_gate_on_both_engines(spark, tmp_path: Path) -> None:
    outcomes = {}
    for engine in ("duckdb", "spark"):
        lake = Lake(tmp_path / engine)
        config = RunConfig(
            inputs=[SAMPLES],
            lake=lake.root,
            close_open=True,
            spark=SparkSettings("local[2]"),
            validation_engine=engine,
        )
        result = run(config, progress=lambda _: None)
        assert result.batch_id is not None and result.counts["frames"] > 0

        report = json.loads((lake.runs_dir / result.batch_id / "validation.json").read_text())
        assert report["success"] is True and report["failed"] == 0, report["failures"]
        assert report["evaluated"] > 100
        assert (lake.docs_dir / "index.html").is_file()
        assert list_quarantined(lake) == []
        outcomes[engine] = report["outcomes"]
    assert outcomes["duckdb"] == outcomes["spark"]
