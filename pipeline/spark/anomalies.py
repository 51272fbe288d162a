"""Capture-level anomalies (bad files, cut records) as rows of the `anomalies` table."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import schemas
from pipeline.lake.reader import local_frame

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def capture_anomalies(packets: DataFrame, paths: Sequence[str], batch_id: str) -> DataFrame:
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    spark = packets.sparkSession
    schema = StructType([StructField("file_id", IntegerType()), StructField("file", StringType())])
    files = local_frame(spark, list(enumerate(paths)), schema)
    kind_detail = F.split(F.col("detail"), ": ", 2)
    rows = (
        packets.where(F.col("record_type") == "anomaly")
        .join(F.broadcast(files), "file_id")
        .select(
            F.lit("capture").alias("source"),
            kind_detail.getItem(0).alias("kind"),
            F.lit(None).cast("string").alias("session_id"),
            F.lit(None).cast("string").alias("direction"),
            "file",
            F.col("record_offset").alias("file_offset"),
            F.lit(None).cast("long").alias("stream_offset"),
            F.lit(None).cast("timestamp").alias("ts"),
            F.lit(None).cast("long").alias("ts_ns"),
            kind_detail.getItem(1).alias("detail"),
            F.current_date().alias("date"),
            F.lit(batch_id).alias("batch_id"),
        )
    )
    return rows.select(*schemas.load("anomalies").column_names)


def capture_anomaly_rows(packets: DataFrame, paths: Sequence[str]) -> list[dict]:
    """The same rows as `capture_anomalies`, collected (one per bad record: bounded by the
    input's records, never by its bytes), for the run to write beside the flow pass's files.
    One job over every partition: `toLocalIterator` ran one job a partition, one after another
    (0.58 GB, 10 partitions: 0.65 s)."""
    from pipeline.spark.table_files import row_struct

    names = [field.name for field in row_struct("anomalies")]
    today = datetime.now(UTC).date()
    rows = []
    found = packets.where("record_type = 'anomaly'").select("file_id", "record_offset", "detail")
    for found_row in found.collect():
        kind, _, detail = found_row.detail.partition(": ")
        row = dict.fromkeys(names)
        row.update(
            source="capture",
            kind=kind,
            file=paths[found_row.file_id],
            file_offset=found_row.record_offset,
            detail=detail,
            date=today,
        )
        rows.append(row)
    return rows
