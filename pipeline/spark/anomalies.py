"""Capture-level anomalies (bad files, cut records) as rows of the `anomalies` table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import schemas

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def capture_anomalies(packets: DataFrame, paths: Sequence[str], batch_id: str) -> DataFrame:
    from pyspark.sql import functions as F

    spark = packets.sparkSession
    files = spark.createDataFrame(list(enumerate(paths)), "file_id int, file string")
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
