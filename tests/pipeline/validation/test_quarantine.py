"""pipeline/validation/quarantine.py: a failed batch's staged files moved aside with their
record and its report, how quarantined batches are listed, released (committed by delta-rs,
without Spark) and discarded, and the errors it raises.

A table that was a computed Spark frame is written into the quarantine by Spark and read back
by Spark on release (``read_quarantined``): that part is left to the Spark tests (test_gate.py,
tests/pipeline/commands/test_quarantine.py)."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

import schemas
from pipeline.errors import StompLakeError, UsageError
from pipeline.lake import Lake, begin_batch
from pipeline.lake.layout import DIR_MODE
from pipeline.lake.reader import table_info
from pipeline.lake.staged_tables import LazyFrames
from pipeline.lake.staging import StagedBatch, moved_batch
from pipeline.lake.statefile import read_json
from pipeline.validation.quarantine import (
    RELEASED,
    REPORT,
    BatchQuarantined,
    NotQuarantined,
    QuarantinedBatch,
    batch_dir,
    discard,
    is_quarantined,
    list_quarantined,
    quarantine_batch,
    release,
    release_batch,
)
from tests.pipeline.validation.batch_rows import good_batch, to_staged

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

REPORT_OF_B1 = {
    "batch_id": "b1",
    "failed": 1,
    "failures": [{"suite": "acks", "expectation": "expect_column_values_to_be_between"}],
}


def no_spark() -> SparkSession:
    raise AssertionError("moved files are committed without Spark")


def _frames_of(staged: Mapping[str, StagedBatch]) -> Mapping[str, DataFrame]:
    """The tables argument for staged tables only: their frames are never read, only named."""
    return cast("Mapping[str, DataFrame]", dict.fromkeys(staged))


def _staged(lake: Lake, batch_id: str) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any]]:
    begin_batch(lake, (), batch_id=batch_id)
    rows = good_batch(batch_id)
    return rows, to_staged(lake, batch_id, rows)


def _quarantined(lake: Lake, batch_id: str, report: dict[str, Any] | None = None) -> Path:
    """A quarantined batch with no table (its report only)."""
    return quarantine_batch(lake, batch_id, {}, report or {"batch_id": batch_id})


def _json(path: Path) -> dict[str, Any]:
    saved = read_json(path)
    assert isinstance(saved, dict), path
    return saved


def _committed_rows(lake: Lake) -> dict[str, int | None]:
    infos = {t: table_info(lake, t) for t in schemas.TABLES}
    return {t: None if info is None else info.rows for t, info in infos.items()}


def test_quarantine_moves_each_staged_tables_files_with_their_record(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake").ensure()
    rows, staged = _staged(lake, "b1")
    placed = {
        (table, f.path): os.stat(batch.table_path / f.path).st_ino
        for table, batch in staged.items()
        for f in batch.files
    }
    seqs = {table: batch.seq for table, batch in staged.items()}
    before = datetime.now().astimezone().replace(microsecond=0)

    folder = quarantine_batch(lake, "b1", _frames_of(staged), REPORT_OF_B1, staged)

    assert folder == batch_dir(lake, "b1") == lake.quarantine_dir / "b1"
    assert stat.S_IMODE(folder.stat().st_mode) == DIR_MODE
    for (table, path), inode in placed.items():  # renamed, not copied
        assert os.stat(folder / table / path).st_ino == inode
        assert not (lake.table_path(table) / path).exists()
    for table in schemas.TABLES:  # each table's record: the batch as `release` takes it back
        moved = moved_batch(folder / table, lake.table_path(table))
        assert moved is not None and moved.batch_id == "b1" and moved.seq == seqs[table]
        assert moved.rows == len(rows[table]), table
    assert all(b.files == [] and not b.staging_dir.exists() for b in staged.values())
    saved = _json(folder / REPORT)
    assert {k: v for k, v in saved.items() if k != "quarantined_at"} == REPORT_OF_B1
    assert datetime.fromisoformat(saved["quarantined_at"]) >= before
    assert "quarantined_at" not in REPORT_OF_B1  # the caller's report is left as it was


def test_quarantine_makes_no_frame_of_a_staged_table(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake").ensure()
    _, staged = _staged(lake, "b1")
    made: list[str] = []

    def load(table: str) -> DataFrame:
        made.append(table)
        return cast("DataFrame", None)

    frames = LazyFrames({}, set(staged), load)
    quarantine_batch(lake, "b1", frames, REPORT_OF_B1, staged)
    assert made == []


def test_a_batch_awaits_review_until_released_and_release_commits_it(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake").ensure()
    assert not is_quarantined(lake, "b1")
    rows, staged = _staged(lake, "b1")
    folder = quarantine_batch(lake, "b1", _frames_of(staged), REPORT_OF_B1, staged)
    assert is_quarantined(lake, "b1")
    assert _committed_rows(lake) == dict.fromkeys(schemas.TABLES)  # nothing visible

    versions = release_batch(lake, "b1", no_spark)

    assert versions == dict.fromkeys(schemas.TABLES, 0)
    assert _committed_rows(lake) == {t: len(rows[t]) for t in schemas.TABLES}
    assert not is_quarantined(lake, "b1")
    assert all(not (folder / t).exists() for t in schemas.TABLES)  # the files went back
    [listed] = list_quarantined(lake)
    assert listed.released and listed.released_at == _json(folder / RELEASED)["released_at"]
    assert release_batch(lake, "b1", no_spark) == {}  # nothing left to commit


def test_release_after_an_attempt_that_stopped_commits_no_table_twice(tmp_path: Path) -> None:
    """A release stopped after a table's commit, before it removed the table's folder: the next
    release finds the batch in the table and only drops the folder."""
    lake = Lake(tmp_path / "lake").ensure()
    rows, staged = _staged(lake, "b1")
    folder = quarantine_batch(lake, "b1", _frames_of(staged), REPORT_OF_B1, staged)
    shutil.copytree(folder / "frames", tmp_path / "frames-kept")
    versions = release_batch(lake, "b1", no_spark)
    shutil.copytree(tmp_path / "frames-kept", folder / "frames")  # as the stopped attempt left
    (folder / RELEASED).unlink()

    assert release_batch(lake, "b1", no_spark) == {"frames": versions["frames"]}
    assert _committed_rows(lake)["frames"] == len(rows["frames"])
    assert not (folder / "frames").exists()
    assert not is_quarantined(lake, "b1")


def test_quarantining_again_replaces_the_report(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake").ensure()
    folder = _quarantined(lake, "b1", {"failed": 3})
    assert _quarantined(lake, "b1", {"failed": 1}) == folder
    saved = _json(folder / REPORT)
    assert saved["failed"] == 1 and "quarantined_at" in saved
    assert [p.name for p in folder.iterdir()] == [REPORT]  # no temporary file left


def test_list_shows_each_complete_batch_in_order_with_what_failed(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    assert list_quarantined(lake) == []  # no quarantine folder at all
    _quarantined(lake, "b2", REPORT_OF_B1)
    _quarantined(lake, "b1", {"failures": []})
    release_batch(lake, "b1", no_spark)  # no table to commit: marked released
    (lake.quarantine_dir / "b3" / "frames").mkdir(parents=True)  # being written: no report yet
    (lake.quarantine_dir / "notes.txt").write_text("not a batch")

    found = list_quarantined(lake)

    assert [b.batch_id for b in found] == ["b1", "b2"]
    first, second = found
    assert first.released and first.released_at is not None and first.failed == ()
    assert not second.released and second.released_at is None
    assert second.failed == ("acks: expect_column_values_to_be_between",)
    assert second.path == batch_dir(lake, "b2")
    assert second.quarantined_at == _json(second.path / REPORT)["quarantined_at"]
    assert not is_quarantined(lake, "b3")  # its report marks a batch complete


def test_release_lists_the_table_folders_in_the_tables_order(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    folder = _quarantined(lake, "b1")
    for name in ("transactions", "frames", "sessions", "not_a_table"):
        (folder / name).mkdir()
    assert release(lake, "b1") == {t: folder / t for t in ("sessions", "frames", "transactions")}


@pytest.mark.parametrize("ask", [release, lambda lake, b: release_batch(lake, b, no_spark)])
def test_a_batch_never_quarantined_cannot_be_released(tmp_path: Path, ask: Any) -> None:
    lake = Lake(tmp_path / "lake").ensure()
    (lake.quarantine_dir / "b1").mkdir(parents=True)  # a folder, but no report
    with pytest.raises(NotQuarantined, match="no quarantined batch 'b1'") as caught:
        ask(lake, "b1")
    assert str(lake.quarantine_dir) in str(caught.value)
    assert isinstance(caught.value, LookupError) and isinstance(caught.value, UsageError)
    assert caught.value.exit_code == 2
    assert not (lake.quarantine_dir / "b1" / RELEASED).exists()


def test_discard_removes_the_batch_and_ignores_an_unknown_one(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    folder = _quarantined(lake, "b1")
    _quarantined(lake, "b2")
    discard(lake, "b1")
    discard(lake, "never-there")
    assert not folder.exists()
    assert not is_quarantined(lake, "b1") and is_quarantined(lake, "b2")
    assert [b.batch_id for b in list_quarantined(lake)] == ["b2"]


def test_asking_for_a_quarantined_batch_is_an_operator_error(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    error = BatchQuarantined(lake, "b1")
    assert error.batch_id == "b1" and error.exit_code == 4
    assert isinstance(error, StompLakeError) and isinstance(error, RuntimeError)
    message = str(error)
    assert "batch b1 failed validation earlier" in message
    assert str(batch_dir(lake, "b1")) in message and "report.json" in message


@pytest.mark.parametrize(("released_at", "released"), [(None, False), ("2025-01-01", True)])
def test_a_listed_batch_is_released_once_it_has_a_release_time(
    tmp_path: Path, released_at: str | None, released: bool
) -> None:
    batch = QuarantinedBatch("b1", tmp_path, "2024-12-31", ("acks: x",), released_at)
    assert batch.released is released
