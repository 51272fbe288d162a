"""The lake's front door on a real lake folder, without Spark: the lock and the integrity check
on open, a batch's beginning, its end when set aside, and a batch a kill left complete but for
its end mark. The commit path is the runs' (tests/pipeline/commands)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.lake import carried
from pipeline.lake.damage import DamagedLake
from pipeline.lake.failpoints import KILL_AT_ENV
from pipeline.lake.front import LakeFront
from pipeline.lake.lock import LakeBusy
from pipeline.lake.staged_tables import StagedTables
from tests.support.paths import REPO, SAMPLES

# Set aside (nothing staged, no connection open) until the given failpoint kills the process.
SET_ASIDE = """
import sys
from pathlib import Path
from pipeline.lake.front import LakeFront
from pipeline.lake.staged_tables import StagedTables
with LakeFront.open(Path(sys.argv[1])) as front:
    batch = front.begin(front.scan(sys.argv[2:]).new, None)
    front.set_aside(StagedTables(front.lake, batch.batch_id, {}), batch, None)
"""


@pytest.fixture
def captures(tmp_path: Path) -> list[Path]:
    copied = []
    for sample in sorted(SAMPLES.glob("*.pcap*"))[:2]:
        copied.append(Path(shutil.copy(sample, tmp_path / sample.name)))
    return copied


def test_a_batch_set_aside_moves_its_files_and_state_on(
    tmp_path: Path, captures: list[Path]
) -> None:
    with LakeFront.open(tmp_path / "lake") as front:
        assert front.pending() is None
        batch = front.begin(front.scan(captures).new, "b-1")
        assert front.pending() == batch and {f.path for f in batch.files} == set(map(str, captures))
        front.set_aside(StagedTables(front.lake, batch.batch_id, {}), batch, None)
        assert front.pending() is None
        assert carried.current_state_batch(front.lake) == "b-1"
        assert not front.scan(captures).new  # the ledger holds them


def test_open_holds_the_lock(tmp_path: Path) -> None:
    with LakeFront.open(tmp_path / "lake"):
        held = subprocess.run(
            [sys.executable, "-c", SET_ASIDE, str(tmp_path / "lake")],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
        )
    assert held.returncode != 0 and LakeBusy.__name__ in held.stderr


def test_open_refuses_a_damaged_lake(tmp_path: Path, captures: list[Path]) -> None:
    with LakeFront.open(tmp_path / "lake") as front:
        batch = front.begin(front.scan(captures).new, "b-1")
        front.set_aside(StagedTables(front.lake, batch.batch_id, {}), batch, None)
    carried.pointer_path(front.lake).write_text("")  # the state pointer emptied
    with pytest.raises(DamagedLake), LakeFront.open(tmp_path / "lake"):
        pass


def test_a_batch_killed_before_its_end_mark_is_finished_by_the_next_run(
    tmp_path: Path, captures: list[Path]
) -> None:
    lake = tmp_path / "lake"
    killed = subprocess.run(
        [sys.executable, "-c", SET_ASIDE, str(lake), *map(str, captures)],
        cwd=REPO,
        env={**os.environ, KILL_AT_ENV: "run.advanced"},
        check=False,
    )
    assert killed.returncode < 0
    with LakeFront.open(lake) as front:
        batch = front.pending()
        assert batch is not None
        assert front.complete_but_for_its_mark(batch)
        assert front.pending() is None and not front.scan(captures).new
