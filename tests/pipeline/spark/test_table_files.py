"""Table rows written as Parquet by the flow pass's tasks: layout, schema and one file a date."""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb
import polars
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import schemas
from pipeline.lake.commit import DataFile, app_id_for, commit_files
from pipeline.lake.stats import file_stats
from pipeline.spark.table_files import (
    DICTIONARY_PAGE_BYTES,
    ROW_GROUP_ROWS,
    TableFileWriter,
    column_encodings,
    dictionary_columns,
    file_schema,
    statistics_columns,
    write_table_rows,
)
from tests.support.table_rows import anomaly_row, frame_row


def test_rows_land_in_one_file_per_date_with_the_stored_schema(tmp_path: Path) -> None:
    rows = [anomaly_row(1 + i % 3, i) for i in range(30)]
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


@pytest.mark.parametrize("write_behind", [False, True])
def test_a_writer_keeps_one_file_per_date_across_row_groups(
    tmp_path: Path, write_behind: bool
) -> None:
    writer = TableFileWriter({"anomalies": str(tmp_path)}, "b-2", write_behind=write_behind)
    count = ROW_GROUP_ROWS * 2 + 5
    for start in range(0, count, 1000):
        writer.add("anomalies", [anomaly_row(7, i) for i in range(start, min(start + 1000, count))])
    (written,) = writer.close()
    metadata = pq.read_metadata(tmp_path / written.path)
    assert metadata.num_rows == written.rows == count
    assert metadata.num_row_groups >= 2
    offsets = pq.read_table(tmp_path / written.path).column("file_offset").to_pylist()
    assert offsets == list(range(count))  # in the order rows came


def test_a_row_group_that_fails_to_be_written_fails_the_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Row groups written behind, on a thread of their own: a failure there is raised to the
    task, at its next row group or at the latest when it closes its files."""

    def fail(self: pq.ParquetWriter, table: pa.Table, row_group_size: int | None = None) -> None:
        raise OSError("No space left on device")

    monkeypatch.setattr(pq.ParquetWriter, "write_table", fail)
    writer = TableFileWriter({"anomalies": str(tmp_path)}, "b-3", write_behind=True)
    writer.add("anomalies", [anomaly_row(7, i) for i in range(10)])
    with pytest.raises(OSError, match="No space left"):
        writer.close()


def test_only_repeating_values_keep_a_dictionary(tmp_path: Path) -> None:
    rows = [anomaly_row(1, i) for i in range(ROW_GROUP_ROWS)]
    for row in rows:  # distinct, hardly compressible: 1.3 MB, a dictionary of 1 MB unbounded
        row["detail"] = hashlib.sha256(str(row["file_offset"]).encode()).hexdigest()
    (written,) = write_table_rows("anomalies", rows, str(tmp_path), "b-3")
    group = pq.read_metadata(tmp_path / written.path).row_group(0)
    columns = {c.path_in_schema: c for c in map(group.column, range(group.num_columns))}

    def dictionary_page_bytes(name: str) -> int:
        column = columns[name]
        assert column.has_dictionary_page and "RLE_DICTIONARY" in column.encodings
        return int(column.data_page_offset - column.dictionary_page_offset)

    assert dictionary_page_bytes("kind") < 100  # one value for every row
    assert not columns["file_offset"].has_dictionary_page  # numbers: none
    # The dictionary stops near its limit (34 KB of digests) and the rest is written plain;
    # with Arrow's default limit of 1 MB it held 0.56 MB of them.
    assert dictionary_page_bytes("detail") <= 2 * DICTIONARY_PAGE_BYTES
    assert columns["detail"].total_compressed_size > 8 * DICTIONARY_PAGE_BYTES  # the limit bites
    assert pq.read_table(tmp_path / written.path).column("detail").to_pylist() == [
        row["detail"] for row in rows
    ]


def test_statistics_are_written_for_the_columns_delta_reads_them_of(tmp_path: Path) -> None:
    row = frame_row(0)
    (written,) = write_table_rows("frames", [row], str(tmp_path), "b-4")
    group = pq.read_metadata(tmp_path / written.path).row_group(0)
    with_statistics = {
        column.path_in_schema
        for column in map(group.column, range(group.num_columns))
        if column.is_stats_set
    }
    assert "session_id" in with_statistics and "frame_index" in with_statistics
    assert not any(path.startswith(("headers.", "header_list.")) for path in with_statistics)
    assert set(statistics_columns(file_schema("frames"))) >= with_statistics
    assert not {"body", "body_preview"} & set(statistics_columns(file_schema("frames")))
    metadata = pq.read_metadata(tmp_path / written.path)
    assert file_stats(metadata)["minValues"]["session_id"] == "s-1"  # Delta's, as before


def test_free_text_and_bodies_get_no_parquet_statistics() -> None:
    stored = {table: statistics_columns(file_schema(table)) for table in schemas.TABLES}
    assert "ws_path" not in stored["sessions"] and "session_id" in stored["sessions"]
    assert "close_reason" not in stored["websocket_controls"]
    assert "detail" not in stored["anomalies"] and "kind" in stored["anomalies"]
    assert not {"message", "body_preview"} & set(stored["errors"])
    assert not {"body", "body_preview"} & set(stored["messages"])


@pytest.mark.parametrize("table", schemas.TABLES)
def test_only_top_level_text_columns_keep_a_dictionary(table: str) -> None:
    """The headers' keys and values are written plain: no reader filters row groups by a
    nested column's dictionary, and zstd makes them as small without one. Digests keep none
    either: they never repeat but for equal bodies."""
    stored = file_schema(table)
    text = [f.name for f in stored if pa.types.is_string(f.type)]
    assert dictionary_columns(table) == [name for name in text if not name.endswith("_sha256")]


def test_numbers_times_and_digests_are_written_in_delta_encodings(tmp_path: Path) -> None:
    rows = [frame_row(index) | {"body_sha256": hashlib.sha256(b"%d" % index).hexdigest()}
            for index in range(50)]  # fmt: skip
    (written,) = write_table_rows("frames", rows, str(tmp_path), "b-5")
    group = pq.read_metadata(tmp_path / written.path).row_group(0)
    encodings = {c.path_in_schema: c.encodings for c in map(group.column, range(group.num_columns))}
    for name in ("frame_index", "ts", "ts_ns", "stream_offset", "content_length"):
        assert "DELTA_BINARY_PACKED" in encodings[name], name
    assert "DELTA_LENGTH_BYTE_ARRAY" in encodings["body_sha256"]
    assert column_encodings("frames")["ts_end_ns"] == "DELTA_BINARY_PACKED"
    assert "body_sha256" in column_encodings("messages")
    assert "ack_id" not in column_encodings("acks")  # other text: a dictionary while it repeats
    assert "RLE_DICTIONARY" in encodings["command"]  # text that repeats keeps its dictionary
    back = pq.read_table(tmp_path / written.path)
    assert back.column("body_sha256").to_pylist() == [row["body_sha256"] for row in rows]
    assert back.column("ts_ns").to_pylist() == [row["ts_ns"] for row in rows]


def test_spark_and_delta_readers_read_the_delta_encodings(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Spark's vectorized reader, delta-rs, DuckDB (validation's) and Polars read every column
    as written."""
    rows = [frame_row(index) | {"body_sha256": hashlib.sha256(b"%d" % index).hexdigest()}
            for index in range(50)]  # fmt: skip
    (written,) = write_table_rows("frames", rows, str(tmp_path / "files"), "b-6")
    path = tmp_path / "files" / written.path
    expected = pq.read_table(path)
    read = spark.read.parquet(str(path)).orderBy("frame_index")
    columns = ["frame_index", "ts_ns", "ts_end_ns", "tcp_offset", "body_sha256"]
    assert [tuple(r) for r in read.select(*columns, F.unix_micros("ts")).collect()] == list(
        zip(
            *(expected.column(c).to_pylist() for c in columns),
            [row["ts_ns"] // 1000 for row in rows],
            strict=True,
        )
    )
    by_duckdb = duckdb.connect().execute(f"SELECT * FROM read_parquet('{path}')").arrow()
    assert by_duckdb.read_all().select(columns).to_pylist() == expected.select(columns).to_pylist()
    by_polars = polars.read_parquet(path).select(columns)
    assert by_polars.to_dicts() == expected.select(columns).to_pylist()
    spec = schemas.load("frames")
    data_file = DataFile(
        written.path,
        path.stat().st_size,
        {"date": "2025-01-15"},
        1,
        written.rows,
        file_stats(pq.read_metadata(path)),
    )
    commit_files(
        tmp_path / "files",
        [data_file],
        schema=spec.arrow_schema(),
        partition_by=list(spec.partition_by),
        app_id=app_id_for("frames"),
        batch_id="b-6",
        seq=1,
    )
    delta = DeltaTable(tmp_path / "files").to_pyarrow_table().select(expected.column_names)
    assert delta.sort_by("frame_index").equals(expected)


def test_header_columns_are_written_without_a_dictionary(tmp_path: Path) -> None:
    frames = [frame_row(index) for index in range(50)]
    (written,) = write_table_rows("frames", frames, str(tmp_path), "b-1")
    group = pq.read_metadata(tmp_path / written.path).row_group(0)
    columns = {c.path_in_schema: c for c in map(group.column, range(group.num_columns))}
    assert columns["command"].has_dictionary_page
    nested = [path for path in columns if "." in path]
    assert "headers.key_value.value" in nested
    assert not any(columns[path].has_dictionary_page for path in nested)
    assert pq.read_table(tmp_path / written.path).column("header_list").to_pylist()[3] == [
        {"name": "destination", "value": "/queue/a"},
        {"name": "message-id", "value": "m-3"},
    ]
