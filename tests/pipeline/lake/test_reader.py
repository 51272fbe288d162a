from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from pipeline.lake.layout import LEDGER, Lake
from pipeline.lake.ledger import Ledger
from pipeline.lake.reader import TableNotFound, empty_frame, list_tables, local_frame, read_table
from pipeline.lake.writer import write_table_batch
from tests.pipeline.lake.conftest import event_rows, events_frame, runs_python, sort_rows

pytestmark = pytest.mark.spark


def write(spark, lake: Lake, rows: list[dict], batch_id: str, schema, table: str = "events"):
    return write_table_batch(
        events_frame(spark, rows, schema),
        lake,
        table,
        schema=schema,
        partition_by=["date"],
        batch_id=batch_id,
    )


def test_read_back_without_delta_jars_gives_the_rows(
    spark, lake: Lake, events_spark_schema
) -> None:
    write(spark, lake, event_rows(1), "batch-1", events_spark_schema)
    write(spark, lake, event_rows(2), "batch-2", events_spark_schema)
    frame = read_table(spark, lake, "events")
    assert frame.schema == events_spark_schema
    got = sort_rows(frame.toArrow().to_pylist())  # timestamps as UTC instants
    assert got == sort_rows(event_rows(1) + event_rows(2))
    assert {r["date"] for r in got} == {date(2026, 11, 21), date(2026, 11, 22)}
    assert got[0]["ts"].microsecond == 997_008  # microseconds survive the round trip


def test_table_not_created_yet(spark, lake: Lake, events_spark_schema) -> None:
    empty = read_table(spark, lake, "events", schema=events_spark_schema)
    assert empty.schema == events_spark_schema and empty.count() == 0
    with pytest.raises(TableNotFound):
        read_table(spark, lake, "events")


def test_empty_frames_need_no_python(spark, lake: Lake, events_spark_schema) -> None:
    for frame in (
        empty_frame(spark, events_spark_schema),
        read_table(spark, lake, "events", schema=events_spark_schema),
    ):
        assert frame.schema == events_spark_schema
        assert frame.collect() == [] and not runs_python(frame)
    assert runs_python(spark.createDataFrame([], events_spark_schema))  # what they replace


def test_local_frame_holds_the_rows_in_the_jvm(spark) -> None:
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    schema = StructType(
        [
            StructField("name", StringType()),
            StructField("n", LongType()),
            StructField("share", DoubleType()),
        ]
    )
    rows = [("a", 1, None), ("b", None, 0.5)]
    frame = local_frame(spark, rows, schema)
    assert frame.schema == schema and not runs_python(frame)
    assert [tuple(r) for r in frame.collect()] == rows


def test_table_with_no_files_reads_empty(spark, lake: Lake, events_spark_schema) -> None:
    write(spark, lake, [], "batch-1", events_spark_schema)
    frame = read_table(spark, lake, "events")
    assert frame.count() == 0 and frame.schema == events_spark_schema
    assert not runs_python(frame)


def test_odd_characters_in_the_lake_path(spark, tmp_path: Path, events_spark_schema) -> None:
    lake = Lake(tmp_path / "lake [v1] {a,b} * ? #").ensure()
    write(spark, lake, event_rows(1), "batch-1", events_spark_schema)
    assert read_table(spark, lake, "events").count() == 6
    capture = tmp_path / "a.pcap"
    capture.write_bytes(b"x")
    ledger = Ledger(lake)
    ledger.record(ledger.new_files([capture]), "batch-1")
    assert ledger.new_files([capture]) == []


def test_partition_values_with_special_characters(spark, lake: Lake) -> None:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType([StructField("n", LongType()), StructField("dest", StringType())])
    values = ["/queue/a:b", "100%", "sp ace", "x=y?", None, "ünï"]
    frame = spark.createDataFrame(list(enumerate(values)), schema)
    write_table_batch(frame, lake, "dests", schema=schema, partition_by=["dest"], batch_id="b1")
    import deltalake

    delta = deltalake.DeltaTable(lake.table_path("dests")).to_pyarrow_table().to_pylist()
    assert sorted(delta, key=lambda r: r["n"]) == [
        {"n": n, "dest": v} for n, v in enumerate(values)
    ]
    back = [row.asDict() for row in read_table(spark, lake, "dests").collect()]
    assert sorted(back, key=lambda r: r["n"]) == [{"n": n, "dest": v} for n, v in enumerate(values)]


def test_list_tables_counts(spark, lake: Lake, events_spark_schema, tmp_path: Path) -> None:
    assert list_tables(lake) == []
    write(spark, lake, event_rows(1), "batch-1", events_spark_schema)
    write(spark, lake, event_rows(2), "batch-2", events_spark_schema)
    write(spark, lake, event_rows(3, count=2), "batch-3", events_spark_schema, table="other")
    capture = tmp_path / "a.pcap"
    capture.write_bytes(b"x")
    ledger = Ledger(lake)
    ledger.record(ledger.new_files([capture]), "batch-3")
    infos = {t.name: t for t in list_tables(lake)}
    assert sorted(infos) == ["events", "other"]
    events = infos["events"]
    assert (events.version, events.rows, events.files) == (1, 12, 4)
    assert events.partition_by == ["date"]
    assert events.size_bytes == sum(
        p.stat().st_size
        for p in lake.table_path("events").rglob("*.parquet")
        if "_" not in p.parts[-2][:1]
    )
    assert events.last_commit is not None
    assert (infos["other"].version, infos["other"].rows) == (0, 2)
    with_ledger = {t.name: t for t in list_tables(lake, include_ledger=True)}
    assert with_ledger[LEDGER].rows == 1


def test_explicit_schema_reads_columns_older_files_lack(
    spark, lake: Lake, events_spark_schema
) -> None:
    from pyspark.sql.types import StringType, StructField, StructType

    write(spark, lake, event_rows(1), "batch-1", events_spark_schema)
    wider = StructType([*events_spark_schema.fields, StructField("extra", StringType())])
    rows = read_table(spark, lake, "events", schema=wider).collect()
    assert len(rows) == 6 and all(r["extra"] is None for r in rows)
