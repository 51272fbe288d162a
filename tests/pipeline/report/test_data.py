"""The report's Spark aggregates on the sample lake, against the samples' client-side records."""

from __future__ import annotations

from collections import Counter

import pytest

from pipeline.audit.views import register_views
from pipeline.report import data
from tests.pipeline.audit.sample_lake import connections, shared_sample_lake

ENDINGS = {
    "disconnect": "disconnect_receipt",
    "disconnect-unanswered": "disconnect",
    "server-close": "error",
    "open": "capture_end",
}


@pytest.fixture(scope="module")
def views(spark, tmp_path_factory):
    session = spark.newSession()
    register_views(session, shared_sample_lake(tmp_path_factory))
    return session


def _rows(frame) -> list[dict]:
    return [r.asDict() for r in frame.collect()]


def test_bucket_widths_keep_the_bucket_count_bounded() -> None:
    assert data.choose_bucket(30) == 1
    assert data.choose_bucket(121) == 2
    assert data.choose_bucket(3600) == 30
    assert data.choose_bucket(86400 * 365) / (86400 * 365) >= 1 / data.MAX_BUCKETS
    assert data.bin_labels((0, 1, 2.5), " ms") == ["0–1 ms", "1–2.5 ms", "≥2.5 ms"]


@pytest.mark.spark
def test_bin_index_puts_each_value_in_its_bin(spark) -> None:
    from pyspark.sql import functions as F

    values = spark.createDataFrame(
        [(v,) for v in (-1.0, 0.0, 0.5, 1.0, 2.4, 2.5, 99.0)], "v double"
    )
    got = [r.b for r in values.select(data.bin_index(F.col("v"), (0, 1, 2.5)).alias("b")).collect()]
    assert got == [0, 0, 0, 1, 1, 2, 2]


@pytest.mark.spark
def test_rates_add_up_to_the_messages_per_destination(views) -> None:
    rows = _rows(data.rates_by_destination(views.table("messages"), 1))
    delivered: Counter[str] = Counter()
    for row in rows:
        delivered[row["destination"]] += row["delivered"]
        assert row["bucket_us"] % 1_000_000 == 0
    expected = Counter(m["destination"] for c in connections() for m in c["messages_received"])
    assert +delivered == expected


@pytest.mark.spark
def test_ack_latency_histogram_counts_every_settled_message(views) -> None:
    messages = views.table("messages")
    bins = _rows(data.ack_latency_histogram(messages))
    settled = 0
    for conn in connections():
        named = set(conn["ack_ids_sent"]) | set(conn["nack_ids_sent"])
        received = conn["messages_received"]
        acked_on = {m["destination"] for m in received if {m["message_id"], m["ack"]} & named}
        settled += sum(1 for m in received if m["destination"] in acked_on)
    assert sum(b["messages"] for b in bins) == settled
    summary = _rows(data.ack_latency_summary(messages))[0]
    assert summary["settled"] == settled
    assert 0 <= summary["p50"] <= summary["p90"] <= summary["p99"] <= summary["max"]


@pytest.mark.spark
def test_heartbeat_lateness_counts_every_beat_of_a_negotiated_direction(views) -> None:
    rows = _rows(data.heartbeat_lateness(views.table("heartbeats")))
    got: Counter[str] = Counter()
    for row in rows:
        got[row["direction"]] += row["beats"]
    expected: Counter[str] = Counter()
    for conn in connections():
        effective = conn["heart_beat_effective"] or {}
        if effective.get("client_to_server_ms"):
            expected["c2s"] += conn["heart_beats_sent"]
        if effective.get("server_to_client_ms"):
            expected["s2c"] += conn["heart_beats_received"]
    assert got == expected


@pytest.mark.spark
def test_sessions_by_end_reason_and_top_talkers(views) -> None:
    sessions = views.table("sessions")
    reasons = {r["end_reason"]: r["sessions"] for r in _rows(data.end_reasons(sessions))}
    assert reasons == Counter(ENDINGS[c["ending"]] for c in connections())
    talkers = _rows(data.top_talkers(sessions))
    assert {t["client"]: t["sessions"] for t in talkers} == Counter(
        f"{c['login']}@127.0.0.1" for c in connections()
    )
    assert all(t["bytes"] == t["bytes_sent"] + t["bytes_received"] for t in talkers)
    sent = Counter(
        f"{c['login']}@127.0.0.1"
        for c in connections()
        for _ in range(c["frames_sent"].get("SEND", 0))
    )
    assert {t["client"]: t["messages_sent"] for t in talkers} == sent


@pytest.mark.spark
def test_anomalies_and_overview(views) -> None:
    kinds = _rows(data.anomalies_by_kind(views.table("anomalies")))
    missing_destination = sum(
        1 for c in connections() for e in c["errors_received"] if "estination" in e["message"]
    )
    assert [(k["source"], k["kind"], k["occurrences"]) for k in kinds] == [
        ("stomp", "missing_header", missing_destination)
    ]
    row = _rows(
        data.overview(views.table("sessions"), views.table("messages"), views.table("anomalies"))
    )[0]
    conns = list(connections())
    assert row["sessions"] == len(conns)
    assert row["connected"] == sum(c["connected"] for c in conns)
    assert row["failed_logins"] == sum(not c["connected"] for c in conns)
    assert row["messages_sent"] == sum(c["frames_sent"].get("SEND", 0) for c in conns)
    assert row["messages_delivered"] == sum(len(c["messages_received"]) for c in conns)
    assert row["violations"] == missing_destination
    span = _rows(data.traffic_span(views.table("messages"), views.table("sessions")))[0]
    assert span["first_us"] < span["last_us"]
