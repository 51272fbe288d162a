"""`stomp-lake run` on a lake whose carried connection state is damaged (a real lake whose last
run carried connections): exit 5 and one line naming the file, nothing deleted or written, and
every later run refuses the same way (the real command in a subprocess; it stops before Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.lake.layout import Lake
from tests.support.carried_lake import CARRIED_DAMAGES, carried_lake_copy
from tests.support.damaged_lake import lake_files, run_cli


@pytest.fixture
def carrying(spark, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Lake:
    return carried_lake_copy(tmp_path_factory, tmp_path / "carrying")


@pytest.mark.parametrize("damage", sorted(CARRIED_DAMAGES))
def test_the_run_refuses_damaged_carried_state_changing_nothing(
    carrying: Lake, tmp_path: Path, damage: str
) -> None:
    damaged = CARRIED_DAMAGES[damage](carrying)
    before = lake_files(carrying)
    for attempt in range(2):
        done = run_cli(carrying, tmp_path / f"work-{attempt}")
        assert done.returncode == 5, done.stderr
        lines = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
        assert len(lines) == 1, lines
        assert str(damaged) in lines[0] and "docs/operations.md" in lines[0], lines[0]
        assert lake_files(carrying) == before
