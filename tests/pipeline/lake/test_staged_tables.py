from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import schemas
from pipeline.lake import Lake, begin_batch, list_tables, read_table
from pipeline.lake.orphans import data_files
from pipeline.lake.staged_tables import (
    LazyFrames,
    commit_tables,
    discard_tables,
    stage_written,
    staging_folders,
)
from tests.pipeline.lake.conftest import runs_python
from tests.pipeline.validation.batch_rows import good_batch, to_frames

pytestmark = pytest.mark.spark


def _contents(frame) -> list[tuple]:
    return sorted(tuple(str(v) for v in row) for row in frame.collect())


def _written_by_tasks(lake: Lake, batch_id: str, rows: dict[str, list[dict]]):
    """The batch's rows written as the flow pass's tasks write them, two writers a table."""
    from pipeline.spark.arrow_rows import row_struct
    from pipeline.spark.table_files import TableFileWriter

    folders = staging_folders(lake, batch_id, schemas.TABLES)
    dirs = {name: str(folder / "parquet") for name, folder in folders.items()}
    written: dict[str, list[str]] = {}
    for half in (0, 1):
        writer = TableFileWriter(dirs, batch_id)
        for name, table_rows in rows.items():
            names = [f.name for f in row_struct(name)]
            mine = [{n: r[n] for n in names} for r in table_rows[half::2]]
            if mine:
                writer.add(name, mine)
        for done in writer.close():
            written.setdefault(done.table, []).append(done.path)
    return folders, written


def test_files_the_tasks_wrote_are_staged_read_back_and_committed(spark, tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake").ensure()
    begin_batch(lake, (), batch_id="b1")
    rows = good_batch("b1")
    computed = to_frames(spark, rows)
    folders, written = _written_by_tasks(lake, "b1", rows)
    stray = folders["frames"] / "parquet" / "date=2025-01-15" / "part-failed-attempt.parquet"
    stray.parent.mkdir(parents=True, exist_ok=True)
    stray.write_bytes(b"not reported by any task")  # a failed attempt's file: never placed

    staged = stage_written(spark, lake, "b1", folders, written)
    assert set(staged.staged) == set(schemas.TABLES) and not staged.committed
    for name, frame in computed.items():
        assert _contents(staged.frames[name]) == _contents(frame), name
    assert list_tables(lake) == []
    versions = commit_tables(staged)
    assert set(versions) == set(schemas.TABLES)
    assert _contents(read_table(spark, lake, "frames")) == _contents(computed["frames"])
    assert not stray.exists()  # the staging folder went with the commit

    folders, written = _written_by_tasks(lake, "b1", rows)  # resumed: validated, not re-staged
    again = stage_written(spark, lake, "b1", folders, written)
    assert again.committed == set(schemas.TABLES) and not again.staged
    assert _contents(again.frames["frames"]) == _contents(computed["frames"])
    assert commit_tables(again) == versions
    assert not any(folder.exists() for folder in folders.values())


def test_frames_read_when_asked_for_are_those_read_at_once(spark, tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake").ensure()
    begin_batch(lake, (), batch_id="b2")
    rows = good_batch("b2")
    folders, written = _written_by_tasks(lake, "b2", rows)
    lazy = stage_written(spark, lake, "b2", folders, written, read_now=False)
    assert isinstance(lazy.frames, LazyFrames)
    assert set(lazy.frames) == set(schemas.TABLES) and "frames" in lazy.frames
    assert _contents(lazy.frames["frames"]) == _contents(to_frames(spark, rows)["frames"])
    discard_tables(lazy)


def test_lazy_frames_make_each_frame_once_and_only_when_asked_for() -> None:
    made: list[str] = []

    def load(name: str) -> Any:
        made.append(name)
        return f"frame of {name}"

    ready: dict[str, Any] = {"done": "ready"}
    frames: Any = LazyFrames(ready, {"a", "b", "done"}, load)
    assert "a" in frames and len(frames) == 3 and made == []
    assert frames["a"] == frames["a"] == "frame of a" and made == ["a"]
    frames["b"] = "given"
    del frames["done"]
    assert dict(frames) == {"a": "frame of a", "b": "given"} and made == ["a"]


def test_discarded_tables_leave_no_file_behind(spark, tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake").ensure()
    begin_batch(lake, (), batch_id="b1")
    folders, written = _written_by_tasks(lake, "b1", good_batch("b1"))
    staged = stage_written(spark, lake, "b1", folders, written)
    assert set(staged.staged) == set(schemas.TABLES)
    discard_tables(staged)
    for name in schemas.TABLES:
        assert data_files(lake.table_path(name)) == []
        assert not any((lake.table_path(name) / "_staging").glob("*"))


def test_a_table_no_task_wrote_reads_empty_without_python(spark, tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake").ensure()
    begin_batch(lake, (), batch_id="b1")
    rows = {**good_batch("b1"), "errors": []}
    folders, written = _written_by_tasks(lake, "b1", rows)
    assert "errors" not in written
    staged = stage_written(spark, lake, "b1", folders, written)
    errors = staged.frames["errors"]
    assert errors.schema == schemas.load("errors").spark_schema() and errors.count() == 0
    assert not runs_python(errors)  # validation's queries over it start no Python task
