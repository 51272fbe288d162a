"""The maintenance jobs as a library: real ledger, real Delta tables, real capture files."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from pipeline.errors import UsageError
from pipeline.lake import Lake, Ledger, lake_lock
from pipeline.lake.damage import DamagedLake
from pipeline.lake.fingerprint import fingerprint
from pipeline.maintenance import (
    CheckFailed,
    NoLake,
    RunFailed,
    carried_age,
    check_ingested,
    close_carried,
    commit_report,
    existing_lake,
    locked,
    retain_captures,
)
from tests.support.carried_state import carry
from tests.support.damaged_lake import garble_batch_counter

DAY = 86_400


def capture(folder: Path, name: str, days_old: float, payload: bytes) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(payload)
    when = time.time() - days_old * DAY
    os.utime(path, (when, when))
    return path


def ingested(lake: Lake, files: list[Path], batch_id: str) -> None:
    Ledger(lake).record([fingerprint(f) for f in files], batch_id)


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return Lake(tmp_path / "lake").ensure()


def test_the_commit_report_is_one_sorted_json_line() -> None:
    line = commit_report(["b2", "b1", "b2"], ["sessions", "frames"], 3)
    assert "\n" not in line
    assert json.loads(line) == {
        "batches": ["b1", "b2"],
        "tables": ["frames", "sessions"],
        "files": 3,
    }


def test_check_lists_each_problem(lake: Lake, tmp_path: Path) -> None:
    done = capture(tmp_path, "done.pcap", 0, b"done")
    missing = capture(tmp_path, "missing.pcap", 0, b"missing")
    ingested(lake, [done], "b1")

    result = check_ingested(lake, [str(done), str(missing)], None)

    assert result.problems == [f"not ingested: {missing}", f"no tables in {lake.tables_dir}"]
    assert (result.ingested, result.batches, result.tables) == (1, [], [])


def test_check_names_batches_since_a_time_and_counts_duplicates(lake: Lake, tmp_path: Path) -> None:
    early = capture(tmp_path, "early.pcap", 0, b"early")
    late = capture(tmp_path, "late.pcap", 0, b"late")
    copy = capture(tmp_path, "copy.pcap", 0, b"late")
    ingested(lake, [early], "b-early")
    between = datetime.now(UTC)
    ingested(lake, [late], "b-late")
    write_deltalake(str(lake.table_path("probe")), pa.table({"n": [1]}))
    files = [str(early), str(late), str(copy)]

    since = check_ingested(lake, files, between)
    every = check_ingested(lake, files, None)

    assert since.problems == [] and since.batches == ["b-late"]
    assert (every.batches, every.ingested, every.duplicates) == (["b-early", "b-late"], 2, 1)
    assert every.lake_tables == ["probe"] and every.tables == []  # not a pipeline table
    with pytest.raises(UsageError):
        check_ingested(lake, files, datetime(2026, 11, 20, 10))


def test_retention_counts_old_files_and_moves_only_ingested_ones(
    lake: Lake, tmp_path: Path
) -> None:
    captures, archive = tmp_path / "captures", tmp_path / "archive"
    old = capture(captures, "host/old.pcap", 40, b"old")
    waiting = capture(captures, "waiting.pcap", 40, b"waiting")
    capture(captures, "young.pcap", 1, b"young")
    ingested(lake, [old], "b1")

    kept = retain_captures(lake, captures, 30, "keep", None, time.time())
    assert (kept.old, kept.ingested, kept.done) == (2, [old], [])
    with pytest.raises(UsageError):
        retain_captures(lake, captures, 30, "move", None, time.time())

    moved = retain_captures(lake, captures, 30, "move", archive, time.time())

    assert moved.done == [(old, archive / "host" / "old.pcap")]
    assert (archive / "host" / "old.pcap").read_bytes() == b"old" and waiting.exists()


def test_maintenance_needs_an_existing_lake(tmp_path: Path) -> None:
    with pytest.raises(NoLake):
        existing_lake(tmp_path / "nowhere")
    assert not (tmp_path / "nowhere").exists()


def test_locked_refuses_a_damaged_lake(lake: Lake) -> None:
    garble_batch_counter(lake)
    with pytest.raises(DamagedLake), locked(lake, wait=0):
        pytest.fail("ran on a damaged lake")
    with lake_lock(lake):  # the lock was let go
        pass


def test_carried_state_is_closed_by_the_run_it_is_given(lake: Lake) -> None:
    carry(lake, "b1", connections=2, days_old=9)
    state = carried_age(lake)
    assert state.connections == 2 and state.age_days == pytest.approx(9, abs=0.01)
    runs: list[list[str]] = []

    def failing_run(argv: Sequence[str]) -> int:
        runs.append(list(argv))
        return 4

    with pytest.raises(RunFailed) as failed:
        close_carried(lake, "expire-1", failing_run, ["--master", "local[1]"])
    assert failed.value.exit_code == 4
    (argv,) = runs
    assert argv[:2] == ["run", "--input"] and not Path(argv[2]).exists()  # an empty folder
    assert argv[3:] == [
        "--lake", str(lake.root), "--open-connections", "close", "--batch-id", "expire-1",
        "--master", "local[1]",
    ]  # fmt: skip
    with pytest.raises(CheckFailed, match="2 connections still carried"):
        close_carried(lake, "expire-1", lambda argv: 0, [])
