from __future__ import annotations

import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from pipeline.lake.layout import LEDGER, Lake
from pipeline.lake.ledger import Ledger
from pipeline.lake.maintenance import compact, vacuum
from pipeline.lake.orphans import data_files
from pipeline.lake.reader import TableNotFound, read_table
from pipeline.lake.writer import write_table_batch
from tests.pipeline.lake.conftest import event_rows, events_frame, sort_rows
from tests.support.carried_state import carry

pytestmark = pytest.mark.spark


def three_batches(spark, lake: Lake, schema) -> list[dict]:
    for batch in (1, 2, 3):
        write_table_batch(
            events_frame(spark, event_rows(batch), schema),
            lake,
            "events",
            schema=schema,
            partition_by=["date"],
            batch_id=f"batch-{batch}",
        )
    return sort_rows(event_rows(1) + event_rows(2) + event_rows(3))


def test_compact_then_vacuum(spark, lake: Lake, events_spark_schema) -> None:
    expected = three_batches(spark, lake, events_spark_schema)
    path = lake.table_path("events")
    assert len(DeltaTable(path).file_uris()) == 6

    metrics = compact(lake, "events", target_file_mb=16)
    assert (metrics["numFilesAdded"], metrics["numFilesRemoved"]) == (2, 6)
    delta = DeltaTable(path)
    assert len(delta.file_uris()) == 2
    assert sort_rows(delta.to_pyarrow_table().to_pylist()) == expected
    assert sort_rows(read_table(spark, lake, "events").toArrow().to_pylist()) == expected
    assert delta.transaction_version("stomp-lake:events") is not None  # markers survive

    assert vacuum(lake, "events", retention_hours=1) == []  # replaced files still in retention
    assert len(data_files(path)) == 8
    removed = vacuum(lake, "events", retention_hours=0)
    assert len(removed) == 6
    assert len(data_files(path)) == 2
    assert sort_rows(read_table(spark, lake, "events").toArrow().to_pylist()) == expected
    for entry in path.rglob("*"):
        assert entry.stat().st_mode & 0o007 == 0, entry


def test_compact_again_does_nothing(spark, lake: Lake, events_spark_schema) -> None:
    three_batches(spark, lake, events_spark_schema)
    compact(lake, "events")
    version = DeltaTable(lake.table_path("events")).version()
    assert compact(lake, "events")["numFilesAdded"] == 0
    assert DeltaTable(lake.table_path("events")).version() == version


def test_ledger_compacts_too(lake: Lake, tmp_path) -> None:
    ledger = Ledger(lake)
    for n in range(3):
        capture = tmp_path / f"{n}.pcap"
        capture.write_bytes(bytes([n]))
        ledger.record(ledger.new_files([capture]), f"batch-{n}")
    assert compact(lake, LEDGER)["numFilesRemoved"] == 3
    assert ledger.entries().num_rows == 3


def test_missing_table(lake: Lake) -> None:
    with pytest.raises(TableNotFound):
        compact(lake, "absent")
    with pytest.raises(ValueError):
        vacuum(lake, "absent", retention_hours=-1)


def test_compacted_files_keep_no_bounds_of_free_text(lake: Lake) -> None:
    path = lake.delta_path("anomalies")
    for n in range(2):
        rows = {"kind": [f"k-{n}"], "detail": [f"odd token: tok-{n}"], "date": ["2026-11-29"]}
        write_deltalake(str(path), pa.table(rows), mode="append", partition_by=["date"])
    assert compact(lake, "anomalies")["numFilesAdded"] == 1
    (added,) = pa.table(DeltaTable(path).get_add_actions(flatten=True)).to_pylist()
    assert added["min.kind"] == "k-0" and added["max.kind"] == "k-1"
    assert added.get("min.detail") is None and added.get("max.detail") is None
    (uri,) = DeltaTable(path).file_uris()
    group = pq.read_metadata(uri.removeprefix("file://")).row_group(0)
    columns = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    assert columns["kind"].statistics.has_min_max
    detail = columns["detail"]
    assert not detail.is_stats_set or not detail.statistics.has_min_max


def test_the_whole_lake_compacts_and_vacuums(lake: Lake, tmp_path) -> None:
    from pipeline.lake.maintenance import compact_lake, vacuum_lake

    ledger = Ledger(lake)
    for n in range(3):
        capture = tmp_path / f"{n}.pcap"
        capture.write_bytes(bytes([n]))
        ledger.record(ledger.new_files([capture]), f"batch-{n}")
        write_deltalake(str(lake.table_path("frames")), pa.table({"n": [n]}), mode="append")
    compacted = compact_lake(lake, target_file_mb=16)
    assert [(c.table, c.files_removed, c.files_added) for c in compacted] == [
        ("frames", 3, 1),
        (LEDGER, 3, 1),
    ]
    vacuumed = vacuum_lake(lake, retention_hours=0, now=time.time())
    assert vacuumed.files_removed == {"frames": 3, LEDGER: 3}
    assert vacuumed.state_folders_removed == []
    assert ledger.entries().num_rows == 3


def test_connections_are_counted_and_aged_only_when_carried(lake: Lake) -> None:
    from pipeline.lake.maintenance import carried_connections, carried_state_age_days

    assert carried_state_age_days(lake, time.time()) is None
    carry(lake, "b1", connections=0, days_old=10)
    assert carried_connections(lake) == 0
    assert carried_state_age_days(lake, time.time()) is None  # a state, but no connection
    carry(lake, "b2", connections=2, days_old=10)
    assert carried_connections(lake) == 2
    assert carried_state_age_days(lake, time.time()) == pytest.approx(10, abs=0.01)


def test_only_superseded_state_past_the_retention_is_pruned(lake: Lake) -> None:
    from pipeline.lake.batches import begin_batch
    from pipeline.lake.maintenance import prune_carried_state

    superseded = carry(lake, "b1", connections=1, days_old=3)
    young = carry(lake, "b2", connections=1, days_old=0)
    pending = carry(lake, "b3", connections=1, days_old=3)
    current = carry(lake, "b4", connections=1, days_old=3)
    begin_batch(lake, [], batch_id="b3")

    assert prune_carried_state(lake, retention_hours=24, now=time.time()) == ["b1"]

    assert not superseded.exists()
    assert young.exists() and pending.exists() and current.exists()
    assert prune_carried_state(lake, retention_hours=24, now=time.time()) == []


def test_damaged_state_is_never_pruned_as_none(lake: Lake) -> None:
    from pipeline.lake.damage import DamagedLake
    from pipeline.lake.maintenance import prune_carried_state

    old = carry(lake, "b1", connections=1, days_old=3)
    carry(lake, "b2", connections=1, days_old=3)
    (lake.state_dir / "connections" / "current.json").unlink()

    with pytest.raises(DamagedLake):
        prune_carried_state(lake, retention_hours=24, now=time.time())
    assert old.exists()
