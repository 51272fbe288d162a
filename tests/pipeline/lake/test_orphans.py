"""Clean-up removes what killed runs left, and only what this lake's records prove no commit
ever added: a file no batch claims, or any file of a table whose log is damaged, stays."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from pipeline.lake.batches import batch_sequence, begin_batch
from pipeline.lake.commit import app_id_for, commit_files
from pipeline.lake.layout import DELTA_LOG, LEDGER, Lake
from pipeline.lake.ledger import Ledger
from pipeline.lake.lock import lake_lock
from pipeline.lake.orphans import cleanup_lake, cleanup_orphans, data_files, referenced_paths
from pipeline.lake.staging import StagedBatch, stage_files, staging_folder
from pipeline.lake.writer import commit_staged
from tests.pipeline.lake.conftest import forget_staging

SCHEMA = pa.schema([pa.field("n", pa.int64()), pa.field("day", pa.string())])


def stage(lake: Lake, batch_id: str, numbers: list[int], day: str = "d1") -> StagedBatch:
    """What a run does up to its commit: Parquet in a staging folder, placed in the table."""
    folder = staging_folder(lake, "t", batch_id)
    output = folder / "parquet" / f"day={day}" / f"part-{batch_id}.parquet"
    output.parent.mkdir(parents=True)
    pq.write_table(pa.table({"n": numbers}), output)
    written = [output.relative_to(folder / "parquet").as_posix()]
    return stage_files(
        lake,
        "t",
        schema=SCHEMA,
        partition_by=["day"],
        batch_id=batch_id,
        staging_dir=folder,
        written=written,
    )


def committed_table(lake: Lake) -> Path:
    for batch_id, numbers in (("B1", [1, 2]), ("B2", [3])):
        commit_staged(stage(lake, batch_id, numbers))
    return lake.table_path("t")


def numbers(path: Path) -> list[int]:
    return sorted(DeltaTable(path).to_pyarrow_table()["n"].to_pylist())


def age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    for entry in [path, *path.rglob("*")]:
        os.utime(entry, (then, then))


def test_placed_files_of_a_batch_that_never_committed_go(lake: Lake) -> None:
    path = committed_table(lake)
    killed = stage(lake, "B3", [4, 5], day="d9")  # killed before its commit
    placed = [path / f.path for f in killed.files]
    forget_staging()
    assert cleanup_orphans(lake, "t") == 0  # young, and the lake not locked: another run's?
    assert all(p.exists() for p in placed)
    with lake_lock(lake):
        assert cleanup_orphans(lake, "t") == 2  # the placed file and the staging folder
    assert not any(p.exists() for p in placed) and not killed.staging_dir.exists()
    assert not (path / "day=d9").exists()
    assert numbers(path) == [1, 2, 3]


def test_old_leftovers_go_without_the_lock(lake: Lake) -> None:
    path = committed_table(lake)
    killed = stage(lake, "B3", [4])
    forget_staging()
    age(path, 7200)
    assert cleanup_orphans(lake, "t") == 2
    assert not (path / killed.files[0].path).exists()
    assert numbers(path) == [1, 2, 3]


def test_a_batch_killed_after_its_commit_keeps_its_files(lake: Lake) -> None:
    path = committed_table(lake)
    done = stage(lake, "B3", [4])
    staging_dir = done.staging_dir
    commit_files(  # committed, but killed before its staging folder was released
        path,
        done.files,
        schema=SCHEMA,
        partition_by=["day"],
        app_id=app_id_for("t"),
        batch_id="B3",
        seq=batch_sequence(lake, "B3"),
    )
    forget_staging()
    with lake_lock(lake):
        assert cleanup_orphans(lake, "t") == 1  # the staging folder only
    assert not staging_dir.exists()
    assert numbers(path) == [1, 2, 3, 4]


def test_staged_files_never_placed_go_with_their_folder(lake: Lake) -> None:
    path = committed_table(lake)
    folder = staging_folder(lake, "t", "B3")  # killed while Spark wrote it
    (folder / "parquet" / "day=d1").mkdir(parents=True)
    pq.write_table(pa.table({"n": [9]}), folder / "parquet" / "day=d1" / "part-0.parquet")
    temp_commit = path / DELTA_LOG / "_commit_1234.json.tmp"
    temp_commit.write_text("{}")
    with lake_lock(lake):
        assert cleanup_orphans(lake, "t") == 2  # the folder and delta-rs' temporary commit
    assert not folder.exists() and not temp_commit.exists()


def test_files_no_batch_claims_stay(lake: Lake, caplog: pytest.LogCaptureFixture) -> None:
    path = committed_table(lake)
    stray = path / "day=d1" / "part-stray.parquet"
    pq.write_table(pa.table({"n": [99]}), stray)
    with caplog.at_level(logging.WARNING), lake_lock(lake):
        assert cleanup_orphans(lake, "t") == 0
    assert stray.exists()
    assert "no batch of this lake claims" in caplog.text


def test_an_add_removed_from_the_log_deletes_nothing(lake: Lake) -> None:
    """The log still parses, but no longer names a committed file: clean-up must not take
    the file for an orphan."""
    path = committed_table(lake)
    files_before = set(data_files(path))
    first = path / DELTA_LOG / f"{0:020d}.json"
    lines = first.read_text().splitlines()
    first.write_text("\n".join(line for line in lines if '"add"' not in line) + "\n")
    with lake_lock(lake):
        assert cleanup_lake(lake)["t"] == 0
    assert set(data_files(path)) == files_before


def test_a_deleted_first_commit_deletes_nothing(lake: Lake) -> None:
    path = committed_table(lake)
    killed = stage(lake, "B3", [4])
    forget_staging()
    files_before = set(data_files(path))
    (path / DELTA_LOG / f"{0:020d}.json").unlink()
    with lake_lock(lake):
        assert cleanup_orphans(lake, "t") == 0
    assert set(data_files(path)) == files_before and killed.staging_dir.exists()


def test_unreadable_log_leaves_everything_alone(lake: Lake) -> None:
    path = committed_table(lake)
    killed = stage(lake, "B3", [4])
    forget_staging()
    with (path / DELTA_LOG / f"{1:020d}.json").open("a") as log_file:
        log_file.write('{"add": {"path": "day=d1/x.parq')  # cut mid-line
    with lake_lock(lake):
        assert cleanup_orphans(lake, "t") == 0
    assert (path / killed.files[0].path).exists() and killed.staging_dir.exists()


def test_ledger_file_of_a_pending_batch_goes(lake: Lake, tmp_path: Path) -> None:
    capture = tmp_path / "a.pcap"
    capture.write_bytes(b"A" * 10)
    ledger = Ledger(lake)
    ledger.record(ledger.new_files([capture]), "B1")
    second = tmp_path / "b.pcap"
    second.write_bytes(b"B" * 10)
    found = ledger.new_files([second])
    pending = begin_batch(lake, found, batch_id="B2")
    rows = pa.table({"path": ["x"]})
    orphan = ledger._write_file(rows, pending.seq)  # killed before its ledger commit
    with lake_lock(lake):
        assert cleanup_lake(lake)[LEDGER] == 1
    assert not (lake.ledger_path / orphan.path).exists()
    ledger.record(found, "B2")
    stale = ledger._write_file(rows, pending.seq)  # an earlier attempt's, beside the commit
    with lake_lock(lake):
        assert cleanup_lake(lake)[LEDGER] == 1
    assert not (lake.ledger_path / stale.path).exists()
    assert sorted(Path(p).name for p in ledger.entries()["path"].to_pylist()) == [
        "a.pcap",
        "b.pcap",
    ]


def test_cleanup_lake_covers_tables_never_committed(lake: Lake) -> None:
    """A run killed before a table's first commit leaves files in a folder with no log."""
    batch_sequence(lake, "B1")
    staged = stage(lake, "B1", [1])
    forget_staging()
    assert lake.table_names() == []
    with lake_lock(lake):
        assert cleanup_lake(lake) == {"t": 2, LEDGER: 0}
    assert not (lake.table_path("t") / staged.files[0].path).exists()


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


def test_files_older_versions_still_read_are_kept(lake: Lake) -> None:
    path = make_table(lake)
    DeltaTable(path).optimize.compact()
    files_before = set(data_files(path))
    assert len(files_before) == 3  # two replaced, one compacted
    assert {p.relative_to(path).as_posix() for p in files_before} <= referenced_paths(path)
    assert cleanup_orphans(lake, "t", min_age_seconds=0) == 0
    assert set(data_files(path)) == files_before
    assert DeltaTable(path, version=1).count() == 3


def test_missing_table_is_nothing_to_do(lake: Lake) -> None:
    assert cleanup_orphans(lake, "absent", min_age_seconds=0) == 0
