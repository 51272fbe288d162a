"""The report's Spark jobs: small aggregates from the lake's tables, DataFrames in and out.

Times leave Spark as microseconds since the epoch (`*_us` columns), so collecting them does not
depend on the local zone of the Python process.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

# Bucket widths (s) for rates over time; the report takes the smallest giving <= MAX_BUCKETS.
BUCKET_SECONDS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)
MAX_BUCKETS = 120
ACK_LATENCY_EDGES_MS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 60000)
LATENESS_EDGES = (0, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0)


def choose_bucket(span_seconds: float) -> int:
    for width in BUCKET_SECONDS:
        if span_seconds / width <= MAX_BUCKETS:
            return width
    return BUCKET_SECONDS[-1] * math.ceil(span_seconds / BUCKET_SECONDS[-1] / MAX_BUCKETS)


def bin_index(value: Column, edges: Sequence[float]) -> Column:
    """0 for values below edges[1], ..., len(edges) - 1 for values at or above the last edge."""
    from pyspark.sql import functions as F

    index = F.lit(len(edges) - 1)
    for i in range(len(edges) - 1, 0, -1):
        index = F.when(value < edges[i], i - 1).otherwise(index)
    return index


def bin_labels(edges: Sequence[float], unit: str = "") -> list[str]:
    labels = [f"{lo:g}–{hi:g}{unit}" for lo, hi in zip(edges, edges[1:], strict=False)]
    return [*labels, f"≥{edges[-1]:g}{unit}"]


def traffic_span(messages: DataFrame, sessions: DataFrame) -> DataFrame:
    """One row: first_us, last_us over messages, or over sessions when there are none."""
    from pyspark.sql import functions as F

    times = messages.select(F.unix_micros("ts").alias("t")).unionByName(
        sessions.select(F.unix_micros("started_at").alias("t"))
    )
    return times.agg(F.min("t").alias("first_us"), F.max("t").alias("last_us"))


def rates_by_destination(messages: DataFrame, bucket_seconds: int) -> DataFrame:
    """destination, bucket_us, sent, delivered: SEND and MESSAGE frames per bucket."""
    from pyspark.sql import functions as F

    width = bucket_seconds * 1_000_000
    bucket = (F.floor(F.unix_micros("ts") / width) * width).alias("bucket_us")
    return (
        messages.where(F.col("destination").isNotNull())
        .groupBy("destination", bucket)
        .agg(
            F.count_if(F.col("command") == "SEND").alias("sent"),
            F.count_if(F.col("command") == "MESSAGE").alias("delivered"),
        )
    )


def ack_latency_histogram(messages: DataFrame) -> DataFrame:
    """bin, messages: settled MESSAGEs per ack latency bin (ACK_LATENCY_EDGES_MS)."""
    from pyspark.sql import functions as F

    settled = messages.where(F.col("ack_latency_ms").isNotNull())
    return (
        settled.groupBy(bin_index(F.col("ack_latency_ms"), ACK_LATENCY_EDGES_MS).alias("bin"))
        .agg(F.count("*").alias("messages"))
        .orderBy("bin")
    )


def ack_latency_summary(messages: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    latency = F.col("ack_latency_ms")
    return messages.where(latency.isNotNull()).agg(
        F.count("*").alias("settled"),
        F.percentile_approx(latency, 0.5, 10000).alias("p50"),
        F.percentile_approx(latency, 0.9, 10000).alias("p90"),
        F.percentile_approx(latency, 0.99, 10000).alias("p99"),
        F.max(latency).alias("max"),
    )


def heartbeat_lateness(heartbeats: DataFrame) -> DataFrame:
    """direction, bin, beats: heart-beats per bin of gap / negotiated interval."""
    from pyspark.sql import functions as F

    ratio = F.col("gap_ms") / F.col("expected_ms")
    return (
        heartbeats.where((F.col("expected_ms") > 0) & F.col("gap_ms").isNotNull())
        .groupBy("direction", bin_index(ratio, LATENESS_EDGES).alias("bin"))
        .agg(F.count("*").alias("beats"))
    )


def end_reasons(sessions: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return (
        sessions.groupBy("end_reason")
        .agg(F.count("*").alias("sessions"))
        .orderBy(F.desc("sessions"), "end_reason")
    )


def top_talkers(sessions: DataFrame, limit: int = 10) -> DataFrame:
    """Clients (login@address) by bytes both ways."""
    from pyspark.sql import functions as F

    client = F.concat_ws(
        "@", F.coalesce("login", F.lit("?")), F.coalesce("client_ip", F.lit("?"))
    ).alias("client")
    return (
        sessions.groupBy(client)
        .agg(
            F.count("*").alias("sessions"),
            F.sum("c2s_bytes").alias("bytes_sent"),
            F.sum("s2c_bytes").alias("bytes_received"),
            F.sum("messages_sent").alias("messages_sent"),
            F.sum("messages_delivered").alias("messages_delivered"),
        )
        .withColumn("bytes", F.col("bytes_sent") + F.col("bytes_received"))
        .orderBy(F.desc("bytes"), "client")
        .limit(limit)
    )


def anomalies_by_kind(anomalies: DataFrame) -> DataFrame:
    """source, kind, occurrences, sessions."""
    from pyspark.sql import functions as F

    return (
        anomalies.groupBy("source", "kind")
        .agg(F.count("*").alias("occurrences"), F.count_distinct("session_id").alias("sessions"))
        .orderBy(F.desc("occurrences"), "source", "kind")
    )


def overview(sessions: DataFrame, messages: DataFrame, anomalies: DataFrame) -> DataFrame:
    """One row of headline counts."""
    from pyspark.sql import functions as F

    per_session = sessions.agg(
        F.count("*").alias("sessions"),
        F.count("connected_at").alias("connected"),
        F.count_if(
            F.col("connect_command").isNotNull()
            & F.col("connected_at").isNull()
            & (F.col("errors") > 0)
        ).alias("failed_logins"),
        F.count_distinct("client_ip").alias("client_addresses"),
        F.coalesce(F.sum(F.col("c2s_bytes") + F.col("s2c_bytes")), F.lit(0)).alias("bytes"),
    )
    per_message = messages.agg(
        F.count_if(F.col("command") == "SEND").alias("messages_sent"),
        F.count_if(F.col("command") == "MESSAGE").alias("messages_delivered"),
        F.count_distinct("destination").alias("destinations"),
    )
    violations = anomalies.agg(F.count_if(F.col("source") == "stomp").alias("violations"))
    return per_session.crossJoin(per_message).crossJoin(violations)


LATENCY_EDGES_MS = ACK_LATENCY_EDGES_MS


def latency_histogram(frame: DataFrame, column: str, edges: Sequence[float]) -> DataFrame:
    """bin, n: rows per bin of `column` (nulls left out)."""
    from pyspark.sql import functions as F

    known = frame.where(F.col(column).isNotNull())
    return (
        known.groupBy(bin_index(F.col(column), edges).alias("bin"))
        .agg(F.count("*").alias("n"))
        .orderBy("bin")
    )


def latency_summary(frame: DataFrame, column: str) -> DataFrame:
    """One row: n, p50, p90, p99, max of `column` (nulls left out)."""
    from pyspark.sql import functions as F

    value = F.col(column)
    return frame.where(value.isNotNull()).agg(
        F.count("*").alias("n"),
        F.percentile_approx(value, 0.5, 10000).alias("p50"),
        F.percentile_approx(value, 0.9, 10000).alias("p90"),
        F.percentile_approx(value, 0.99, 10000).alias("p99"),
        F.max(value).alias("max"),
    )


def error_frames(errors: DataFrame, sessions: DataFrame) -> DataFrame:
    """ERROR frames with who got them: ts_us, login, client_ip, client_port, message,
    receipt_id, connection_closed, logged_in (false: the ERROR refused the CONNECT)."""
    from pyspark.sql import functions as F

    who = sessions.select(
        "session_id", "login", "client_ip", "client_port", "connected_at", "connect_command"
    )
    return (
        errors.join(who, "session_id", "left")
        .select(
            F.unix_micros("ts").alias("ts_us"),
            "login",
            "client_ip",
            "client_port",
            "message",
            "receipt_id",
            "connection_closed",
            F.col("connected_at").isNotNull().alias("logged_in"),
        )
        .orderBy("ts_us", "client_ip", "client_port")
    )


def failed_logins(sessions: DataFrame, errors: DataFrame) -> DataFrame:
    """Connections whose CONNECT was answered by ERROR, not CONNECTED: started_us, login,
    client_ip, client_port, message (the first ERROR's)."""
    from pyspark.sql import functions as F

    first_error = errors.groupBy("session_id").agg(
        F.min_by("message", "frame_index").alias("message")
    )
    refused = sessions.where(
        F.col("connect_command").isNotNull()
        & F.col("connected_at").isNull()
        & (F.col("errors") > 0)
    )
    return (
        refused.join(first_error, "session_id", "left")
        .select(
            F.unix_micros("started_at").alias("started_us"),
            "login",
            "client_ip",
            "client_port",
            "message",
        )
        .orderBy("started_us", "client_ip", "client_port")
    )


def delivery_latencies(messages: DataFrame) -> DataFrame:
    """End-to-end latency of each delivered MESSAGE: destination, latency_ms from the SEND
    (any session) with the same destination, body length and body sha256, the latest one sent
    before it. MESSAGEs no captured SEND matches are left out."""
    from pyspark.sql import functions as F

    key = ["destination", "body_length", "body_sha256"]
    sends = messages.where((F.col("command") == "SEND") & F.col("body_sha256").isNotNull()).select(
        *key, F.col("ts_ns").alias("sent_ns")
    )
    delivered = messages.where(
        (F.col("command") == "MESSAGE") & F.col("body_sha256").isNotNull()
    ).select(*key, "session_id", "frame_index", F.col("ts_ns").alias("delivered_ns"))
    pairs = delivered.join(sends, key).where(F.col("sent_ns") <= F.col("delivered_ns"))
    return pairs.groupBy("session_id", "frame_index", "destination").agg(
        ((F.min(F.col("delivered_ns") - F.col("sent_ns"))) / 1e6).alias("latency_ms")
    )


def latency_by(frame: DataFrame, group: str, column: str, limit: int) -> DataFrame:
    """group, n, p50, p99, max of `column` per value of `group`, slowest p99 first."""
    from pyspark.sql import functions as F

    value = F.col(column)
    return (
        frame.where(value.isNotNull())
        .groupBy(group)
        .agg(
            F.count("*").alias("n"),
            F.percentile_approx(value, 0.5, 10000).alias("p50"),
            F.percentile_approx(value, 0.99, 10000).alias("p99"),
            F.max(value).alias("max"),
        )
        .orderBy(F.desc("p99"), group)
        .limit(limit)
    )
