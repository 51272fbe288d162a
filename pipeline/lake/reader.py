"""Read tables back: into Spark (with or without Delta's jars) and as a summary per table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import pyarrow as pa
from deltalake import DeltaTable

from pipeline.errors import StompLakeError
from pipeline.lake.commit import open_table
from pipeline.lake.layout import LEDGER, Lake
from pipeline.lake.table_schema import delta_schema_to_arrow, to_arrow_schema, to_spark_schema
from pipeline.lake.writer import delta_jars_available

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


class TableNotFound(LookupError, StompLakeError):
    exit_code = 1


@dataclass(frozen=True, slots=True)
class TableInfo:
    name: str
    path: Path
    version: int
    rows: int | None  # from the files' stats; None when some file has none
    files: int
    size_bytes: int
    partition_by: list[str]
    last_commit: datetime | None


def read_table(
    spark: SparkSession, lake: Lake, table: str, *, schema: StructType | pa.Schema | None = None
) -> DataFrame:
    """The table's current snapshot. A table not created yet reads as an empty DataFrame with
    `schema` (TableNotFound without one)."""
    return read_delta(spark, lake.delta_path(table), schema=schema)


def read_delta(
    spark: SparkSession, path: Path, *, schema: StructType | pa.Schema | None = None
) -> DataFrame:
    delta = open_table(path)
    if delta is None:
        if schema is None:
            raise TableNotFound(f"no Delta table at {path}")
        return empty_frame(spark, to_spark_schema(schema))
    spark_schema = to_spark_schema(
        schema if schema is not None else delta_schema_to_arrow(delta.schema())
    )
    columns = [f"`{name}`" for name in spark_schema.fieldNames()]
    if delta_jars_available(spark):
        return spark.read.format("delta").load(str(path)).select(*columns)
    files = snapshot_files(delta, path)
    if not files:
        return empty_frame(spark, spark_schema)
    # Without the connector: the snapshot's files, with partition values from their folders.
    # The paths are literal file names: Spark must not expand `[`, `{`, `*` in them as globs.
    frame = (
        spark.read.schema(spark_schema)
        .option("basePath", str(path))
        .option("__globPaths__", "false")
        .parquet(*files)
    )
    return frame.select(*columns)


def empty_frame(spark: SparkSession, schema: StructType) -> DataFrame:
    return local_frame(spark, [], schema)


def local_frame(
    spark: SparkSession, rows: Sequence[Sequence[Any]], schema: StructType
) -> DataFrame:
    """``rows`` (tuples in ``schema``'s order) as a relation held in the JVM. From a list,
    ``createDataFrame`` makes a Python RDD instead: every query over it starts Python tasks, and
    validation ran dozens of such queries on a batch's empty tables."""
    arrow = to_arrow_schema(schema)
    table = pa.Table.from_pylist([dict(zip(arrow.names, row, strict=True)) for row in rows], arrow)
    return spark.createDataFrame(table, schema=schema)


def snapshot_files(delta: DeltaTable, path: Path) -> list[str]:
    """Absolute paths of the current snapshot's files. (`file_uris()` %-encodes the table
    root but not the rest, which breaks on roots with spaces.)"""
    relative = pa.table(delta.get_add_actions()).column("path").to_pylist()
    return [str(path / unquote(p)) for p in relative]


def list_tables(lake: Lake, *, include_ledger: bool = False) -> list[TableInfo]:
    names = lake.table_names() + ([LEDGER] if include_ledger else [])
    infos = (table_info(lake, name) for name in names)
    return [info for info in infos if info is not None]


def table_info(lake: Lake, name: str) -> TableInfo | None:
    path = lake.delta_path(name)
    delta = open_table(path)
    if delta is None:
        return None
    actions = pa.table(delta.get_add_actions())
    records = actions.column("num_records").to_pylist() if actions.num_rows else []
    history = delta.history(1)
    last = history[0].get("timestamp") if history else None
    return TableInfo(
        name=name,
        path=path,
        version=delta.version(),
        rows=None if any(r is None for r in records) else sum(records),
        files=actions.num_rows,
        size_bytes=sum(actions.column("size_bytes").to_pylist()) if actions.num_rows else 0,
        partition_by=list(delta.metadata().partition_columns),
        last_commit=datetime.fromtimestamp(last / 1000, UTC) if last is not None else None,
    )
