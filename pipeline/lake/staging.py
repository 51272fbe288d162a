"""Step one of a table write: Spark writes the batch as Parquet into a staging folder inside the
table root, then each file moves into its partition folder, with Delta stats read from its footer.

Nothing is visible yet: a Delta reader only sees files the log adds. A run killed here leaves
files no log version references; `cleanup_orphans` removes them. A batch that failed validation
has its placed files moved aside (`move_staged`, a rename each) and back (`restore_staged`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import Schema as DeltaSchema

from pipeline.lake.batches import batch_sequence, validate_batch_id
from pipeline.lake.commit import DataFile, check_fits, open_table
from pipeline.lake.failpoints import failpoint
from pipeline.lake.layout import FILE_MODE, STAGING, Lake, make_private_dir, make_tree_private
from pipeline.lake.statefile import read_json, write_json_atomic
from pipeline.lake.stats import file_stats
from pipeline.lake.table_schema import (
    check_partition_columns,
    delta_schema_to_arrow,
    to_arrow_schema,
    to_spark_schema,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
MANIFEST = "manifest.json"
MOVED_RECORD = "_staged.json"  # beside files moved aside; Spark's Parquet reader skips "_" names
COMPRESSION = "zstd"

_active_staging: dict[Path, StagedBatch] = {}


@dataclass(slots=True)
class StagedBatch:
    """Files of one batch placed under the table root, not committed yet."""

    table: str
    table_path: Path
    batch_id: str
    seq: int
    schema: pa.Schema
    partition_by: list[str]
    files: list[DataFile]
    staging_dir: Path

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files)

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "table_path": str(self.table_path),
            "batch_id": self.batch_id,
            "seq": self.seq,
            "schema": DeltaSchema.from_arrow(self.schema).to_json(),
            "partition_by": self.partition_by,
            "files": [f.to_dict() for f in self.files],
            "staging_dir": str(self.staging_dir),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StagedBatch:
        return cls(
            table=str(data["table"]),
            table_path=Path(data["table_path"]),
            batch_id=str(data["batch_id"]),
            seq=int(data["seq"]),
            schema=delta_schema_to_arrow(DeltaSchema.from_json(data["schema"])),
            partition_by=list(data["partition_by"]),
            files=[DataFile.from_dict(f) for f in data["files"]],
            staging_dir=Path(data["staging_dir"]),
        )


def active_staging(table_path: Path) -> tuple[set[Path], set[str]]:
    """Staging folders and placed files of this process's batches for the table that are not
    committed or discarded yet: cleanup must leave them alone."""
    batches = [b for b in _active_staging.values() if b.table_path == table_path]
    return {b.staging_dir for b in batches}, {f.path for b in batches for f in b.files}


def release_staging(staged: StagedBatch) -> None:
    """Drop the staging folder (its files were committed or discarded)."""
    shutil.rmtree(staged.staging_dir, ignore_errors=True)
    _active_staging.pop(staged.staging_dir, None)


def discard_staged(staged: StagedBatch) -> None:
    """Remove the batch's placed files: only for files no commit references."""
    for data_file in staged.files:
        with contextlib.suppress(FileNotFoundError):
            (staged.table_path / data_file.path).unlink()
    release_staging(staged)


def move_staged(staged: StagedBatch, folder: Path) -> None:
    """Move the batch's placed files (committed nowhere) into ``folder``, laid out as under the
    table root, with their record for `restore_staged`: a rename each, whatever their size."""
    shutil.rmtree(folder, ignore_errors=True)
    make_private_dir(folder)
    for data_file in staged.files:
        target = folder / data_file.path
        make_private_dir(target.parent)
        os.rename(staged.table_path / data_file.path, target)
    write_json_atomic(folder / MOVED_RECORD, staged.to_dict(), mode=FILE_MODE)
    staged.files = []  # nothing of the batch is left under the table root
    release_staging(staged)


def moved_batch(folder: Path, table_path: Path) -> StagedBatch | None:
    """The batch `move_staged` put in ``folder`` (its files still there), to be placed under
    ``table_path``; None when the folder holds no such batch."""
    record = read_json(folder / MOVED_RECORD)
    if record is None:
        return None
    staged = StagedBatch.from_dict(record)
    staged.table_path = table_path
    staged.staging_dir = folder  # dropped once committed
    return staged


def restore_staged(staged: StagedBatch) -> None:
    """Place the files of a `moved_batch` under its table root again, for `commit_staged`.
    Refused (SchemaMismatch) before any file moves when the table can no longer take them."""
    existing = open_table(staged.table_path)
    if existing is not None:
        check_fits(existing, staged.schema, staged.partition_by, staged.table)
    for data_file in staged.files:
        source = staged.staging_dir / data_file.path
        target = staged.table_path / data_file.path
        if not source.exists() and target.exists():
            continue  # placed by an attempt that stopped before its commit
        make_private_dir(target.parent)
        os.link(source, target)  # unlike rename, refuses to replace an existing file
        source.unlink()
    _active_staging[staged.staging_dir] = staged


def stage_batch(
    spark_df: DataFrame,
    lake: Lake,
    table: str,
    *,
    schema: StructType | pa.Schema,
    partition_by: list[str],
    batch_id: str,
) -> StagedBatch:
    arrow_schema = to_arrow_schema(schema)
    check_partition_columns(arrow_schema, partition_by)
    require_micros_timestamps(spark_df.sparkSession, arrow_schema)
    seq = _check_fits(lake, table, arrow_schema, partition_by, batch_id)  # before Spark works
    staging_dir = staging_folder(lake, table, batch_id)
    output = staging_dir / "parquet"
    frame = conform(spark_df, to_spark_schema(schema), partition_by)
    (
        frame.write.mode("errorifexists")
        .option("compression", COMPRESSION)
        .partitionBy(*partition_by)
        .parquet(str(output))
    )
    written = [p.relative_to(output).as_posix() for p in sorted(output.rglob("*.parquet"))]
    return _stage(lake, table, arrow_schema, partition_by, batch_id, seq, staging_dir, written)


def staging_folder(lake: Lake, table: str, batch_id: str) -> Path:
    """A new staging folder of the batch for the table; Parquet goes under its ``parquet/``."""
    table_path = make_private_dir(lake.table_path(table))
    return make_private_dir(table_path / STAGING / f"{batch_id}.{uuid.uuid4().hex[:12]}")


def stage_files(
    lake: Lake,
    table: str,
    *,
    schema: pa.Schema,
    partition_by: list[str],
    batch_id: str,
    staging_dir: Path,
    written: list[str],
) -> StagedBatch:
    """Stage the files another writer (the flow pass's tasks) put under ``staging_dir/parquet``;
    only the ``written`` ones (relative paths), so a failed task attempt's files are left out."""
    check_partition_columns(schema, partition_by)
    seq = _check_fits(lake, table, schema, partition_by, batch_id)
    return _stage(lake, table, schema, partition_by, batch_id, seq, staging_dir, sorted(written))


def _check_fits(
    lake: Lake, table: str, schema: pa.Schema, partition_by: list[str], batch_id: str
) -> int:
    seq = batch_sequence(lake, validate_batch_id(batch_id))
    existing = open_table(lake.table_path(table))
    if existing is not None:
        check_fits(existing, schema, partition_by, table)
    return seq


def _stage(
    lake: Lake,
    table: str,
    schema: pa.Schema,
    partition_by: list[str],
    batch_id: str,
    seq: int,
    staging_dir: Path,
    written: list[str],
) -> StagedBatch:
    make_tree_private(staging_dir)  # the writer's own modes until the files are placed
    failpoint("lake.staged")
    table_path = lake.table_path(table)
    output = staging_dir / "parquet"
    files = [
        placed
        for relative in written
        if (placed := _place(output / relative, output, table_path, partition_by)) is not None
    ]
    staged = StagedBatch(
        table=table,
        table_path=table_path,
        batch_id=batch_id,
        seq=seq,
        schema=schema,
        partition_by=list(partition_by),
        files=files,
        staging_dir=staging_dir,
    )
    _active_staging[staging_dir] = staged
    write_json_atomic(staging_dir / MANIFEST, staged.to_dict(), mode=FILE_MODE)
    return staged


def conform(spark_df: DataFrame, schema: StructType, partition_by: list[str]) -> DataFrame:
    """The schema's columns in its order and types; one task per partition value, so a batch
    writes one file per partition rather than one per task and partition."""
    from pyspark.sql import functions as F

    frame = spark_df.select(
        *[F.col(f"`{f.name}`").cast(f.dataType).alias(f.name) for f in schema.fields]
    )
    if partition_by:
        frame = frame.repartition(*[F.col(f"`{name}`") for name in partition_by])
    return frame


def require_micros_timestamps(spark: SparkSession, schema: pa.Schema) -> None:
    if not any(pa.types.is_timestamp(f.type) for f in schema):
        return
    output_type = spark.conf.get("spark.sql.parquet.outputTimestampType", "INT96") or "INT96"
    if output_type.upper() == "INT96":
        raise ValueError(
            "Spark writes INT96 timestamps, which Delta readers and file stats do not support: "
            "set spark.sql.parquet.outputTimestampType=TIMESTAMP_MICROS (build_spark does)"
        )


def _place(
    parquet: Path, output: Path, table_path: Path, partition_by: list[str]
) -> DataFile | None:
    relative = parquet.relative_to(output)
    metadata = pq.read_metadata(parquet)
    if metadata.num_rows == 0:
        parquet.unlink()
        return None
    partition_values = _partition_values(relative, partition_by)
    target = table_path / relative
    make_private_dir(target.parent)
    os.chmod(parquet, FILE_MODE)
    os.link(parquet, target)  # unlike rename, refuses to replace an existing file
    parquet.unlink()
    info = target.stat()
    return DataFile(
        path=relative.as_posix(),
        size=info.st_size,
        partition_values=partition_values,
        modification_time_ms=info.st_mtime_ns // 1_000_000,
        rows=metadata.num_rows,
        stats=file_stats(metadata),
    )


def _partition_values(relative: Path, partition_by: list[str]) -> dict[str, str | None]:
    folders = relative.parts[:-1]
    pairs = [folder.split("=", 1) for folder in folders]
    names = [unquote(pair[0]) for pair in pairs]
    if names != partition_by or any(len(pair) != 2 for pair in pairs):
        raise RuntimeError(f"unexpected partition folders {folders} for {partition_by}")
    return {name: None if value == HIVE_NULL else unquote(value) for name, value in pairs}
