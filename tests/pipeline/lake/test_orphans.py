from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

from pipeline.lake.layout import LEDGER, Lake
from pipeline.lake.lock import lake_lock
from pipeline.lake.orphans import cleanup_lake, cleanup_orphans, data_files, referenced_paths


def make_table(lake: Lake) -> Path:
    path = lake.table_path("t")
    for part in ([1, 2], [3]):
        write_deltalake(
            path,
            pa.table({"n": part, "day": ["d1"] * len(part)}),
            mode="append",
            partition_by=["day"],
        )
    return path


def leave_leftovers(path: Path, age_seconds: float = 0) -> list[Path]:
    stray = path / "day=d1" / "part-stray.parquet"
    new_partition = path / "day=d9" / "part-stray.parquet"
    staging = path / "_staging" / "B1.abc" / "parquet" / "day=d1"
    temp_commit = path / "_delta_log" / "_commit_1234.json.tmp"
    for parquet in (stray, new_partition, staging / "part-0.parquet"):
        parquet.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"n": [99]}), parquet)
    temp_commit.write_text("{}")
    then = time.time() - age_seconds
    leftovers = [stray, new_partition, staging / "part-0.parquet", temp_commit]
    for entry in [*leftovers, *path.rglob("*")]:
        os.utime(entry, (then, then))
    return leftovers


def test_young_leftovers_stay_unless_the_lake_is_locked(lake: Lake) -> None:
    path = make_table(lake)
    leftovers = leave_leftovers(path)
    assert cleanup_orphans(lake, "t") == 0
    assert all(p.exists() for p in leftovers)
    with lake_lock(lake):
        assert cleanup_orphans(lake, "t") == 4  # two files, one staging folder, one temp commit
    assert not any(p.exists() for p in leftovers)
    assert not (path / "day=d9").exists() and not any((path / "_staging").iterdir())
    assert sorted(DeltaTable(path).to_pyarrow_table()["n"].to_pylist()) == [1, 2, 3]


def test_old_leftovers_go_without_the_lock(lake: Lake) -> None:
    path = make_table(lake)
    leftovers = leave_leftovers(path, age_seconds=7200)
    assert cleanup_orphans(lake, "t") == 4
    assert not any(p.exists() for p in leftovers)
    assert DeltaTable(path).count() == 3


def test_files_older_versions_still_read_are_kept(lake: Lake) -> None:
    path = make_table(lake)
    DeltaTable(path).optimize.compact()
    files_before = set(data_files(path))
    assert len(files_before) == 3  # two replaced, one compacted
    assert {p.relative_to(path).as_posix() for p in files_before} <= referenced_paths(path)
    assert cleanup_orphans(lake, "t", min_age_seconds=0) == 0
    assert set(data_files(path)) == files_before
    assert DeltaTable(path, version=1).count() == 3


def test_table_never_committed_loses_all_its_files(lake: Lake) -> None:
    path = lake.table_path("t")
    stray = path / "day=d1" / "part-0.parquet"
    stray.parent.mkdir(parents=True)
    pq.write_table(pa.table({"n": [1]}), stray)
    assert cleanup_orphans(lake, "t", min_age_seconds=0) == 1
    assert not stray.exists()


def test_unreadable_log_leaves_data_files_alone(lake: Lake) -> None:
    path = make_table(lake)
    leftovers = leave_leftovers(path)
    (path / "_delta_log" / "00000000000000000005.json").write_text("{not json\n")
    removed = cleanup_orphans(lake, "t", min_age_seconds=0)
    assert removed == 1  # the staging folder only
    assert leftovers[0].exists() and leftovers[1].exists()


def test_cleanup_lake_covers_every_table_and_the_ledger(lake: Lake) -> None:
    path = make_table(lake)
    leave_leftovers(path)
    stray = lake.ledger_path / "part-stray.parquet"
    stray.parent.mkdir()
    pq.write_table(pa.table({"n": [1]}), stray)
    with lake_lock(lake):
        assert cleanup_lake(lake) == {"t": 4, LEDGER: 1}
    assert not stray.exists()


def test_cleanup_lake_covers_tables_never_committed(lake: Lake) -> None:
    """A run killed before a table's first commit leaves files in a folder with no log."""
    path = lake.table_path("never")
    placed = path / "date=2026-11-22" / "part-0.parquet"
    staged = path / "_staging" / "B1.abc" / "parquet" / "date=2026-11-22" / "part-0.parquet"
    for parquet in (placed, staged):
        parquet.parent.mkdir(parents=True)
        pq.write_table(pa.table({"n": [1]}), parquet)
    leftovers = [placed, staged]
    assert lake.table_names() == []
    with lake_lock(lake):
        assert cleanup_lake(lake) == {"never": 2, LEDGER: 0}
    assert not any(p.exists() for p in leftovers)


def test_missing_table_is_nothing_to_do(lake: Lake) -> None:
    assert cleanup_orphans(lake, "absent", min_age_seconds=0) == 0
