"""Cross-table checks as small Spark frames, so GX expectations can validate them.

``session_checks``: one row per session id met in the batch (orphans, frame counts, heart-beat
intervals, timestamps inside the session's life and not after the batch's capture window).
``batch_checks``: one row per table (row count against the run's counter; ack resolution share
on the ``acks`` row).

What the traffic does is never judged here (a wire violation is an anomaly row): the checks look
for the pipeline's own mistakes only.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import reduce
from typing import TYPE_CHECKING, Any

import schemas
from pipeline.lake.reader import local_frame
from pipeline.session.protocol import UNMATCHED_AFTER_OVERFLOW

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

CHILD_TABLES: tuple[str, ...] = tuple(t for t in schemas.TABLES if t != "sessions")


def session_checks(
    tables: Mapping[str, DataFrame], known_ids: DataFrame, capture_last_ns: int | None = None
) -> DataFrame:
    """``known_ids`` (one column ``session_id``): sessions published before or still open;
    ``capture_last_ns``: the time of the batch's last TCP packet, None when it had none.

    Nothing in a batch can be later than its last packet, but rows can be earlier than its first
    (a session, a frame or a heart-beat may begin in an earlier batch's packets): from below,
    rows are bounded by their session's lifetime only. A session that started after the batch's
    last packet was carried in from a later capture (older captures back-filled, its connection
    closed with ``--open-connections close``): its times come from that capture, and it is left
    out of ``rows_after_capture``."""
    from pyspark.sql import functions as F

    sessions = tables["sessions"].select(
        "session_id",
        "started_at_ns",
        "ended_at_ns",
        (F.col("c2s_frames") + F.col("s2c_frames")).alias("counted"),
        "heartbeat_c2s_ms",
        "heartbeat_s2c_ms",
    )
    referenced = reduce(
        lambda a, b: a.unionByName(b),
        [tables[t].where("session_id IS NOT NULL").select("session_id") for t in CHILD_TABLES],
    )
    ids = referenced.unionByName(sessions.select("session_id")).distinct()
    known = (
        known_ids.select("session_id")
        .unionByName(sessions.select("session_id"))
        .distinct()
        .withColumn("known", F.lit(True))
    )
    frames = (
        tables["frames"]
        .groupBy("session_id")
        .agg(
            F.count(F.lit(1)).alias("frames_in_batch"),
            F.min("frame_index").alias("first_index"),
            F.min("ts_ns").alias("first_ns"),
            F.max("ts_end_ns").alias("last_ns"),
        )
    )
    interval = F.when(F.col("direction") == "c2s", F.col("heartbeat_c2s_ms")).otherwise(
        F.col("heartbeat_s2c_ms")
    )
    beats = (
        tables["heartbeats"]
        .join(sessions, "session_id")
        .groupBy("session_id")
        .agg(
            F.sum(
                (
                    F.col("expected_ms").isNotNull() & ~F.col("expected_ms").eqNullSafe(interval)
                ).cast("long")
            ).alias("beats_off"),
            F.sum(_outside("ts_ns", "ts_ns")).alias("beats_outside"),
        )
    )
    frames_outside = _outside("first_ns", "last_ns")
    # A closed session's frames and heart-beats end by its ended_at (rows_outside_session): its
    # end and the last frame of a session still open are all that can pass the capture's end.
    after_capture = F.lit(0)
    for column in ("ended_at_ns", "last_ns") if capture_last_ns is not None else ():
        late = (F.col(column) > F.lit(capture_last_ns)).cast("long")
        after_capture = after_capture + F.coalesce(late, F.lit(0))
    if capture_last_ns is not None:
        carried_in = F.coalesce(F.col("started_at_ns") > F.lit(capture_last_ns), F.lit(False))
        after_capture = F.when(carried_in, F.lit(0)).otherwise(after_capture)
    joined = ids.join(known, "session_id", "left").join(sessions, "session_id", "left")
    joined = joined.join(frames, "session_id", "left").join(beats, "session_id", "left")
    wholly_in_batch = F.col("started_at_ns").isNotNull() & (F.col("first_index") == 0)
    return joined.select(
        "session_id",
        F.coalesce(F.col("known"), F.lit(False)).alias("known_session"),
        "frames_in_batch",
        F.when(wholly_in_batch, F.col("counted")).alias("frames_counted"),
        F.coalesce(F.col("beats_off"), F.lit(0)).alias("heartbeats_off_interval"),
        (F.coalesce(frames_outside, F.lit(0)) + F.coalesce(F.col("beats_outside"), F.lit(0))).alias(
            "rows_outside_session"
        ),
        after_capture.cast("long").alias("rows_after_capture"),
    )


def batch_checks(spark: Any, tables: Mapping[str, DataFrame], counts: dict[str, Any]) -> DataFrame:
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    per_table = reduce(
        lambda a, b: a.unionByName(b),
        [tables[t].select(F.lit(t).alias("table")) for t in schemas.TABLES],
    )
    rows = {r["table"]: r["count"] for r in per_table.groupBy("table").count().collect()}
    acks = (
        tables["acks"]
        .agg(
            F.count(F.lit(1)).alias("total"),
            F.sum(F.col("delivered_at_ns").isNotNull().cast("long")).alias("resolved"),
        )
        .first()
    )
    assert acks is not None  # an aggregate without grouping has exactly one row
    unresolvable = (
        tables["anomalies"]
        .where((F.col("source") == "stomp") & (F.col("kind") == UNMATCHED_AFTER_OVERFLOW))
        .count()
    )
    total = acks["total"] - unresolvable
    found = batch_check_rows(rows, total, acks["resolved"], counts)
    data = [tuple(row.values()) for row in found]
    schema = StructType(
        [
            StructField("table", StringType()),
            StructField("table_rows", LongType()),
            StructField("run_counter", LongType()),
            StructField("acks_total", LongType()),
            StructField("resolved_share", DoubleType()),
        ]
    )
    return local_frame(spark, data, schema)


def batch_check_rows(
    rows: dict[str, int], acks_total: int, acks_resolved: int | None, counts: dict[str, Any]
) -> list[dict[str, Any]]:
    """One row per table: its rows against the run's counter; on ``acks``, the share of acks
    resolved to their delivery (the DuckDB checks build the same rows). ``acks_total`` counts
    the acks that could resolve: those naming nothing on a connection that gave MESSAGEs up
    (anomaly ``ack_unmatched_after_overflow``: a lagging consumer) are left out."""
    share = (acks_resolved or 0) / acks_total if acks_total else None
    return [
        {
            "table": t,
            "table_rows": rows.get(t, 0),
            "run_counter": _counter(counts.get(t)),
            "acks_total": acks_total if t == "acks" else None,
            "resolved_share": share if t == "acks" else None,
        }
        for t in schemas.TABLES
    ]


def _outside(first: str, last: str) -> Any:
    """1 when [first, last] leaves the session's [started_at_ns, ended_at_ns], else 0."""
    from pyspark.sql import functions as F

    before = F.col(first) < F.col("started_at_ns")
    return (before | (F.col(last) > F.col("ended_at_ns"))).cast("long")


def _counter(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
