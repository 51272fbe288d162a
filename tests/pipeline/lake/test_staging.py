from __future__ import annotations

import json

import pytest
from deltalake import DeltaTable

from pipeline.lake.layout import Lake
from pipeline.lake.staging import MANIFEST, StagedBatch, discard_staged, stage_batch
from pipeline.lake.writer import write_table_batch
from tests.pipeline.lake.conftest import event_rows, events_frame

pytestmark = pytest.mark.spark


def stage(spark, lake: Lake, schema, batch_id: str = "batch-1", partition_by=("date",)):
    return stage_batch(
        events_frame(spark, event_rows(1), schema),
        lake,
        "events",
        schema=schema,
        partition_by=list(partition_by),
        batch_id=batch_id,
    )


def test_staged_files_sit_in_partition_folders_invisible(
    spark, lake: Lake, events_spark_schema
) -> None:
    staged = stage(spark, lake, events_spark_schema)
    assert sorted(f.partition_values["date"] for f in staged.files) == ["2026-11-21", "2026-11-22"]
    for data_file in staged.files:
        placed = staged.table_path / data_file.path
        assert (
            placed.is_file() and placed.parent.name == f"date={data_file.partition_values['date']}"
        )
        assert placed.name.endswith(".zstd.parquet")
        assert placed.stat().st_mode & 0o777 == 0o640
        assert data_file.stats["numRecords"] == data_file.rows == 3
    assert staged.rows == 6 and staged.bytes == sum(f.size for f in staged.files)
    assert not DeltaTable.is_deltatable(str(staged.table_path))
    assert not list((staged.staging_dir / "parquet").rglob("*.parquet"))  # all moved out
    # Spark creates its files 0644 inside; the staging folder keeps others out.
    assert staged.staging_dir.stat().st_mode & 0o777 == 0o750
    assert staged.staging_dir.parent.stat().st_mode & 0o777 == 0o750


def test_manifest_describes_the_staged_batch(spark, lake: Lake, events_spark_schema) -> None:
    staged = stage(spark, lake, events_spark_schema)
    manifest = json.loads((staged.staging_dir / MANIFEST).read_text())
    restored = StagedBatch.from_dict(manifest)
    assert restored.files == staged.files
    assert restored.schema.equals(staged.schema)
    assert (restored.seq, restored.batch_id, restored.partition_by) == (
        staged.seq,
        "batch-1",
        ["date"],
    )


def test_discarded_batch_leaves_nothing(spark, lake: Lake, events_spark_schema) -> None:
    staged = stage(spark, lake, events_spark_schema)
    discard_staged(staged)
    assert not any(staged.table_path.rglob("*.parquet"))
    assert not staged.staging_dir.exists()


def test_unpartitioned_table(spark, lake: Lake, events_spark_schema) -> None:
    staged = stage(spark, lake, events_spark_schema, partition_by=())
    assert staged.files and all(f.partition_values == {} for f in staged.files)
    assert all("/" not in f.path for f in staged.files)
    assert staged.rows == 6


def test_int96_timestamps_are_refused(spark, lake: Lake, events_spark_schema) -> None:
    key = "spark.sql.parquet.outputTimestampType"
    previous = spark.conf.get(key)
    spark.conf.set(key, "INT96")
    try:
        with pytest.raises(ValueError, match="TIMESTAMP_MICROS"):
            write_table_batch(
                events_frame(spark, event_rows(1), events_spark_schema),
                lake,
                "events",
                schema=events_spark_schema,
                partition_by=["date"],
                batch_id="batch-1",
            )
    finally:
        spark.conf.set(key, previous)
    assert not lake.table_path("events").exists() or not any(
        lake.table_path("events").rglob("*.parquet")
    )


def test_a_batch_over_a_thousand_dates_writes_one_file_per_date(
    spark, lake: Lake, events_spark_schema
) -> None:
    """Rows are grouped by partition before the write: however the rows of a date are spread
    over the input's partitions, a date gets one file, not one per task."""
    from datetime import UTC, datetime, timedelta

    noon = datetime(2026, 1, 1, 12, tzinfo=UTC)
    rows = []
    for day in range(1_000):
        for flow in range(10):  # e.g. 10 SYN-only flows a day
            ts = noon + timedelta(days=day, microseconds=flow)
            rows.append(
                {"ts": ts, "session": f"s{flow}", "seq": day, "body": None, "date": ts.date()}
            )
    frame = events_frame(spark, rows, events_spark_schema).repartition(40)  # dates everywhere
    staged = stage_batch(
        frame, lake, "events", schema=events_spark_schema, partition_by=["date"], batch_id="b-wide"
    )
    per_date: dict[str | None, int] = {}
    for data_file in staged.files:
        date = data_file.partition_values["date"]
        per_date[date] = per_date.get(date, 0) + 1
    assert len(per_date) == 1_000 and staged.rows == 10_000
    assert max(per_date.values()) == 1
    assert len(list(staged.table_path.rglob("*.parquet"))) == 1_000


def test_staging_leaves_nothing_spark_wrote_open_to_others(
    spark, lake: Lake, events_spark_schema
) -> None:
    staged = stage(spark, lake, events_spark_schema)
    for path in [staged.staging_dir, *staged.staging_dir.rglob("*")]:
        assert path.stat().st_mode & 0o777 in ((0o750,) if path.is_dir() else (0o640, 0o600))
