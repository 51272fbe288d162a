"""Table rows written as Parquet by the flow pass's tasks: layout, schema and one file a date."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import pyarrow.parquet as pq

import schemas
from pipeline.spark.table_files import (
    ROW_GROUP_ROWS,
    TableFileWriter,
    file_schema,
    row_struct,
    write_table_rows,
)


def _anomaly(day: int, index: int) -> dict:
    row = dict.fromkeys(f.name for f in row_struct("anomalies"))
    row.update(
        source="capture",
        kind="bad_record_length",
        file="/captures/a.pcap",
        file_offset=index,
        ts=datetime(2025, 1, day, tzinfo=UTC),
        ts_ns=index,
        detail=f"record {index}",
        date=date(2025, 1, day),
    )
    return row


def test_rows_land_in_one_file_per_date_with_the_stored_schema(tmp_path: Path) -> None:
    rows = [_anomaly(1 + i % 3, i) for i in range(30)]
    files = write_table_rows("anomalies", rows, str(tmp_path), "b-1")
    assert sorted(f.path.split("/")[0] for f in files) == [
        "date=2025-01-01",
        "date=2025-01-02",
        "date=2025-01-03",
    ]
    assert sum(f.rows for f in files) == 30
    for written in files:
        table = pq.read_table(tmp_path / written.path)
        assert table.schema.equals(file_schema("anomalies"))
        assert "date" not in table.column_names  # a partition column lives in the folder name
        assert set(table.column("batch_id").to_pylist()) == {"b-1"}
        assert table.num_rows == written.rows == 10


def test_a_writer_keeps_one_file_per_date_across_row_groups(tmp_path: Path) -> None:
    writer = TableFileWriter({"anomalies": str(tmp_path)}, "b-2")
    count = ROW_GROUP_ROWS * 2 + 5
    for start in range(0, count, 1000):
        writer.add("anomalies", [_anomaly(7, i) for i in range(start, min(start + 1000, count))])
    (written,) = writer.close()
    metadata = pq.read_metadata(tmp_path / written.path)
    assert metadata.num_rows == written.rows == count
    assert metadata.num_row_groups >= 2
    offsets = pq.read_table(tmp_path / written.path).column("file_offset").to_pylist()
    assert offsets == list(range(count))  # in the order rows came


def test_every_table_has_a_row_struct_without_the_batch_id() -> None:
    for table in schemas.TABLES:
        names = [field.name for field in row_struct(table)]
        assert names == [n for n in schemas.load(table).column_names if n != "batch_id"]
