"""Write one batch into one table, exactly once.

Without Delta's Spark jars (the case here): Spark writes Parquet, delta-rs commits it
(`stage_batch` then `commit_staged`). With them: the Delta connector writes and commits, with
the same app transaction id. Either way a batch already in the table is skipped, and the caller
is expected to hold `lake_lock`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from pipeline.lake.batches import batch_sequence, validate_batch_id
from pipeline.lake.commit import (
    BATCH_ID_KEY,
    BATCH_SEQ_KEY,
    app_id_for,
    batch_committed,
    commit_files,
    open_table,
)
from pipeline.lake.failpoints import failpoint
from pipeline.lake.layout import Lake
from pipeline.lake.staging import (
    StagedBatch,
    conform,
    discard_staged,
    release_staging,
    stage_batch,
)
from pipeline.lake.table_schema import (
    SchemaMismatch,
    check_partition_columns,
    to_arrow_schema,
    to_spark_schema,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

DELTA_SOURCE_CLASS = "org.apache.spark.sql.delta.sources.DeltaDataSource"


@dataclass(frozen=True, slots=True)
class WriteResult:
    table: str
    batch_id: str
    version: int  # the table's version after the call
    files: int
    rows: int
    bytes: int
    skipped: bool  # the batch was already in the table: nothing written
    engine: str  # "delta-rs" or "delta-spark"


def delta_jars_available(spark: SparkSession) -> bool:
    """Delta's Spark data source is on the driver's classpath."""
    try:
        jvm = spark._jvm
        if jvm is None:  # no JVM at all
            return False
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        loader.loadClass(DELTA_SOURCE_CLASS)
    except Exception:  # py4j error (class missing) or no JVM at all (Spark Connect)
        return False
    return True


def write_table_batch(
    spark_df: DataFrame,
    lake: Lake,
    table: str,
    *,
    schema: StructType | pa.Schema,
    partition_by: list[str],
    batch_id: str,
) -> WriteResult:
    """Append `spark_df` (cast to `schema`) to the table as one commit, unless the batch is
    already in it. The caller holds `lake_lock` and ran `cleanup_orphans` after any crash."""
    seq = batch_sequence(lake, validate_batch_id(batch_id))
    app_id = app_id_for(table)
    existing = open_table(lake.table_path(table))
    if existing is not None and batch_committed(existing, app_id, seq, batch_id):
        return WriteResult(table, batch_id, existing.version(), 0, 0, 0, True, "delta-rs")
    if delta_jars_available(spark_df.sparkSession):
        return _write_with_delta_connector(
            spark_df, lake, table, schema=schema, partition_by=partition_by, batch_id=batch_id
        )
    staged = stage_batch(
        spark_df, lake, table, schema=schema, partition_by=partition_by, batch_id=batch_id
    )
    return commit_staged(staged)


def commit_staged(staged: StagedBatch) -> WriteResult:
    """Step two: one delta-rs transaction adding the staged files, then drop the staging folder."""
    app_id = app_id_for(staged.table)
    existing = open_table(staged.table_path)
    if existing is not None and batch_committed(existing, app_id, staged.seq, staged.batch_id):
        discard_staged(staged)
        return WriteResult(
            staged.table, staged.batch_id, existing.version(), 0, 0, 0, True, "delta-rs"
        )
    failpoint("lake.placed")
    try:
        version = commit_files(
            staged.table_path,
            staged.files,
            schema=staged.schema,
            partition_by=staged.partition_by,
            app_id=app_id,
            batch_id=staged.batch_id,
            seq=staged.seq,
        )
    except SchemaMismatch:
        discard_staged(staged)  # refused before anything was committed
        raise
    failpoint("lake.committed")
    release_staging(staged)
    return WriteResult(
        table=staged.table,
        batch_id=staged.batch_id,
        version=version,
        files=len(staged.files),
        rows=staged.rows,
        bytes=staged.bytes,
        skipped=False,
        engine="delta-rs",
    )


def _write_with_delta_connector(
    spark_df: DataFrame,
    lake: Lake,
    table: str,
    *,
    schema: StructType | pa.Schema,
    partition_by: list[str],
    batch_id: str,
) -> WriteResult:
    check_partition_columns(to_arrow_schema(schema), partition_by)
    seq = batch_sequence(lake, batch_id)
    app_id = app_id_for(table)
    path = lake.table_path(table)
    existing = open_table(path)
    current = existing.transaction_version(app_id) if existing is not None else None
    writer = (
        conform(spark_df, to_spark_schema(schema), partition_by)
        .write.format("delta")
        .mode("append")
        .option("mergeSchema", "true")
        .option("userMetadata", json.dumps({BATCH_ID_KEY: batch_id, BATCH_SEQ_KEY: seq}))
        .partitionBy(*partition_by)
    )
    if current is None or current < seq:
        # The connector skips a write whose txnVersion is not above the table's; a batch resumed
        # after a later one goes without the marker and is recognised by its userMetadata.
        writer = writer.option("txnAppId", app_id).option("txnVersion", seq)
    writer.save(str(path))
    after = open_table(path)
    assert after is not None
    metrics = after.history(1)[0].get("operationMetrics", {})
    return WriteResult(
        table=table,
        batch_id=batch_id,
        version=after.version(),
        files=int(metrics.get("numFiles", 0)),
        rows=int(metrics.get("numOutputRows", 0)),
        bytes=int(metrics.get("numOutputBytes", 0)),
        skipped=False,
        engine="delta-spark",
    )
