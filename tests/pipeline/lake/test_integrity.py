"""The lake's state checked before a run: a real lake (the samples', made by a real run) damaged
in each way a hostile test found; the run refuses with exit 5 and one line naming the file, and
changes nothing."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pipeline.lake.damage import DamagedLake
from pipeline.lake.integrity import check_lake, ensure_intact, read_records, record_path
from pipeline.lake.layout import LEDGER, Lake
from tests.support.damaged_lake import DAMAGES, lake_copy, lake_files, run_cli

pytestmark = pytest.mark.spark


@pytest.fixture
def lake(spark, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Lake:
    return lake_copy(tmp_path_factory, tmp_path / "lake")


def test_a_lake_a_run_made_is_intact_and_cheap_to_check(lake: Lake) -> None:
    assert check_lake(lake) == []
    assert read_records(lake, LEDGER) and all(
        read_records(lake, name) for name in lake.table_names()
    )  # every commit the run wrote was recorded
    started = time.perf_counter()
    for _ in range(5):
        check_lake(lake)
    per_check = (time.perf_counter() - started) / 5
    print(f"check_lake on the samples' lake: {per_check * 1000:.1f} ms")
    assert per_check < 0.25


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_damage_is_found_and_the_run_refuses_changing_nothing(
    lake: Lake, tmp_path: Path, damage: str
) -> None:
    damaged = DAMAGES[damage](lake)
    findings = check_lake(lake)
    assert findings and findings[0].path == damaged, findings
    with pytest.raises(DamagedLake):
        ensure_intact(lake)
    before = lake_files(lake)
    done = run_cli(lake, tmp_path / "work")
    assert done.returncode == 5, done.stderr
    lines = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert str(damaged) in lines[0] and "docs/operations.md" in lines[0], lines[0]
    assert lake_files(lake) == before  # not a data file removed, nothing written


def test_a_lake_of_an_earlier_release_gets_its_commits_recorded(lake: Lake) -> None:
    """No record yet (or a kill between commit and record): the first intact run records."""
    name = lake.table_names()[0]
    recorded = read_records(lake, name)
    record_path(lake, name).unlink()
    assert check_lake(lake) == []
    ensure_intact(lake)
    assert read_records(lake, name) == recorded


def test_a_record_cut_by_a_kill_is_not_damage(lake: Lake) -> None:
    name = lake.table_names()[0]
    with record_path(lake, name).open("a") as record:
        record.write('{"sha256": "ab')
    assert check_lake(lake) == []
    ensure_intact(lake)  # appends on a line of its own
    assert check_lake(lake) == []
