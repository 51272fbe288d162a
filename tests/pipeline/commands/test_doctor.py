"""`stomp-lake doctor` on the samples' lake (made by a real run): intact, then damaged twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.lake.layout import Lake
from tests.support.damaged_lake import (
    garble_batch_counter,
    lake_copy,
    lake_files,
    remove_one_add,
)

pytestmark = pytest.mark.spark


@pytest.fixture
def lake(spark, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Lake:
    return lake_copy(tmp_path_factory, tmp_path / "lake")


def test_an_intact_lake(lake: Lake, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--lake", str(lake.root)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"lake {lake.root}: intact (") and "the ledger" in out


def test_a_damaged_lake_gets_each_finding_and_its_repair(
    lake: Lake, capsys: pytest.CaptureFixture[str]
) -> None:
    edited = remove_one_add(lake)
    counter = garble_batch_counter(lake)
    before = lake_files(lake)
    assert main(["doctor", "--lake", str(lake.root)]) == 5
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"lake {lake.root}: damaged, 2 finding(s)")
    assert "docs/operations.md#damaged-lake-state" in lines[0]
    shown = [str(path.relative_to(lake.root)) for path in (edited, counter)]
    assert lines[1].startswith(f"  {shown[0]}: differs from what this lake committed")
    assert lines[2].startswith("    repair: restore tables/")
    assert lines[3].startswith(f"  {shown[1]}: not a batch counter")
    assert lines[4] == "    repair: delete it: the next run rebuilds it from _state/batches/"
    assert lake_files(lake) == before  # doctor changes nothing


def test_no_lake_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--lake", str(tmp_path / "absent")]) == 2
    assert "no lake at" in capsys.readouterr().err
