from __future__ import annotations

from pathlib import Path

import pytest

import schemas
from pipeline.lake import Lake, begin_batch, list_tables, read_table
from pipeline.lake.orphans import data_files
from pipeline.lake.staged_tables import commit_tables, discard_tables, stage_tables
from tests.pipeline.validation.batch_rows import good_batch, to_frames

pytestmark = pytest.mark.spark


def _contents(frame) -> list[tuple]:
    return sorted(tuple(str(v) for v in row) for row in frame.collect())


def test_staged_files_read_back_as_computed_and_stay_invisible_until_committed(
    spark, tmp_path: Path
) -> None:
    lake = Lake(tmp_path / "lake").ensure()
    begin_batch(lake, (), batch_id="b1")
    computed = to_frames(spark, good_batch("b1"))
    staged = stage_tables(spark, lake, "b1", computed)

    assert set(staged.staged) == set(schemas.TABLES) and not staged.committed
    for name, frame in computed.items():
        assert _contents(staged.frames[name]) == _contents(frame), name
    assert list_tables(lake) == []

    versions = commit_tables(staged)
    assert set(versions) == set(schemas.TABLES)
    assert _contents(read_table(spark, lake, "frames")) == _contents(computed["frames"])

    again = stage_tables(spark, lake, "b1", computed)  # a resumed batch: nothing staged twice
    assert again.committed == set(schemas.TABLES) and not again.staged
    assert commit_tables(again) == versions


def test_discarded_tables_leave_no_file_behind(spark, tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake").ensure()
    begin_batch(lake, (), batch_id="b1")
    staged = stage_tables(spark, lake, "b1", to_frames(spark, good_batch("b1")))
    discard_tables(staged)
    for name in schemas.TABLES:
        assert data_files(lake.table_path(name)) == []
        assert not any((lake.table_path(name) / "_staging").glob("*"))
