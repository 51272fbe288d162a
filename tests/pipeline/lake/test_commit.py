from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from pipeline.lake.commit import (
    BATCH_ID_KEY,
    DataFile,
    app_id_for,
    batch_committed,
    commit_files,
    commit_properties,
)
from pipeline.lake.stats import file_stats
from pipeline.lake.table_schema import SchemaMismatch

SCHEMA = pa.schema([("n", pa.int64()), ("day", pa.string())])


def place(table_path: Path, name: str, values: list[int], day: str) -> DataFile:
    relative = f"day={day}/{name}.parquet"
    target = table_path / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"n": values}), target)
    metadata = pq.read_metadata(target)
    return DataFile(
        relative, target.stat().st_size, {"day": day}, 1, len(values), file_stats(metadata)
    )


def commit(table_path: Path, files: list[DataFile], batch: str, seq: int, schema=SCHEMA) -> int:
    return commit_files(
        table_path,
        files,
        schema=schema,
        partition_by=["day"],
        app_id=app_id_for("t"),
        batch_id=batch,
        seq=seq,
    )


def test_files_become_one_version_with_marker_and_batch_id(tmp_path: Path) -> None:
    path = tmp_path / "t"
    assert commit(path, [place(path, "a", [1, 2], "d1"), place(path, "b", [3], "d2")], "B1", 4) == 0
    delta = DeltaTable(path)
    assert sorted(delta.to_pyarrow_table()["n"].to_pylist()) == [1, 2, 3]
    assert delta.transaction_version(app_id_for("t")) == 4
    assert delta.history(1)[0][BATCH_ID_KEY] == "B1"
    assert commit(path, [place(path, "c", [4], "d1")], "B2", 5) == 1
    assert delta.count() == 3 and DeltaTable(path).count() == 4


def test_batch_committed_uses_marker_then_history(tmp_path: Path) -> None:
    path = tmp_path / "t"
    app = app_id_for("t")
    commit(path, [place(path, "a", [1], "d1")], "B5", 5)
    commit(path, [place(path, "b", [2], "d1")], "B7", 7)
    delta = DeltaTable(path)
    assert batch_committed(delta, app, 7, "B7")
    assert batch_committed(delta, app, 5, "B5")  # behind the marker: found in history
    assert not batch_committed(delta, app, 6, "B6")  # behind the marker, never committed
    assert not batch_committed(delta, app, 8, "B8")


def test_a_batch_resumed_late_never_lowers_the_marker(tmp_path: Path) -> None:
    path = tmp_path / "t"
    commit(path, [place(path, "a", [1], "d1")], "B7", 7)
    commit(path, [place(path, "b", [2], "d1")], "B6", 6)
    delta = DeltaTable(path)
    assert delta.transaction_version(app_id_for("t")) == 7
    assert batch_committed(delta, app_id_for("t"), 6, "B6")
    props = commit_properties(delta, app_id_for("t"), 3, "B3")
    assert props.app_transactions is not None and props.app_transactions[0].version == 7


def test_stats_and_partition_values_reach_the_log(tmp_path: Path) -> None:
    path = tmp_path / "t"
    commit(path, [place(path, "a", [5, 1, 9], "2026-11-22")], "B1", 1)
    log = (path / "_delta_log" / "00000000000000000000.json").read_text().splitlines()
    [add] = [json.loads(line)["add"] for line in log if line.startswith('{"add"')]
    assert add["partitionValues"] == {"day": "2026-11-22"}
    stats = json.loads(add["stats"])
    assert stats == {
        "numRecords": 3,
        "minValues": {"n": 1},
        "maxValues": {"n": 9},
        "nullCount": {"n": 0},
    }


def test_nothing_to_add_leaves_an_existing_table_alone(tmp_path: Path) -> None:
    path = tmp_path / "t"
    assert commit(path, [], "B1", 1) == 0  # creates the (empty) table
    assert DeltaTable(path).count() == 0
    assert commit(path, [], "B2", 2) == 0
    assert DeltaTable(path).version() == 0


def test_added_nullable_column_evolves_the_schema(tmp_path: Path) -> None:
    path = tmp_path / "t"
    commit(path, [place(path, "a", [1], "d1")], "B1", 1)
    wider = pa.schema([("n", pa.int64()), ("day", pa.string()), ("extra", pa.string())])
    commit(path, [place(path, "b", [2], "d1")], "B2", 2, schema=wider)
    delta = DeltaTable(path)
    assert [f.name for f in delta.schema().fields] == ["n", "day", "extra"]
    assert delta.to_pyarrow_table()["extra"].null_count == 2


def test_retyped_or_dropped_column_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t"
    commit(path, [place(path, "a", [1], "d1")], "B1", 1)
    retyped = pa.schema([("n", pa.string()), ("day", pa.string())])
    with pytest.raises(SchemaMismatch, match="'n' is .*long.* in the table"):
        commit(path, [place(path, "b", [2], "d1")], "B2", 2, schema=retyped)
    with pytest.raises(SchemaMismatch, match="'n' is missing"):
        commit(
            path, [place(path, "c", [2], "d1")], "B3", 3, schema=pa.schema([("day", pa.string())])
        )
    assert DeltaTable(path).version() == 0


def test_other_partitioning_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t"
    commit(path, [place(path, "a", [1], "d1")], "B1", 1)
    with pytest.raises(SchemaMismatch, match="partitioned by"):
        commit_files(
            path,
            [],
            schema=SCHEMA,
            partition_by=[],
            app_id=app_id_for("t"),
            batch_id="B2",
            seq=2,
        )


def test_log_files_are_private(tmp_path: Path) -> None:
    path = tmp_path / "t"
    previous = os.umask(0o022)
    try:
        commit(path, [place(path, "a", [1], "d1")], "B1", 1)
    finally:
        os.umask(previous)
    for entry in (path / "_delta_log").iterdir():
        assert entry.stat().st_mode & 0o007 == 0, entry
