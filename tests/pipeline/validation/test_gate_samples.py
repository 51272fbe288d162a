"""The gate on the bundled real captures, through the whole run: real traffic (with its protocol
violations) must pass, and the validation result must be recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.commands.run import RunConfig, run
from pipeline.lake import Lake
from pipeline.validation.quarantine import list_quarantined

SAMPLES = Path(__file__).resolve().parents[3] / "samples"

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_real_samples_pass_the_gate(spark, tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    result = run(
        RunConfig(inputs=[SAMPLES], lake=lake.root, close_open=True, master="local[2]"),
        progress=lambda _: None,
    )
    assert result.batch_id is not None and result.counts["frames"] > 0

    report = json.loads((lake.runs_dir / result.batch_id / "validation.json").read_text())
    assert report["success"] is True and report["failed"] == 0, report["failures"]
    assert report["evaluated"] > 100
    assert (lake.docs_dir / "index.html").is_file()
    assert list_quarantined(lake) == []
