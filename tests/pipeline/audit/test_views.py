"""Every table of the lake as a view, cut to a time window when asked."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import schemas
from pipeline.audit.views import TimeWindow, parse_time, register_views, table_names
from pipeline.lake import Lake
from tests.pipeline.audit.sample_lake import records, shared_sample_lake


def test_times_are_iso_and_utc_unless_they_say_otherwise() -> None:
    assert parse_time("2026-11-22") == datetime(2026, 11, 22, tzinfo=UTC)
    assert parse_time("2026-11-22T02:36:14Z") == datetime(2026, 11, 22, 2, 36, 14, tzinfo=UTC)
    assert parse_time("2026-11-22 03:36:14+01:00") == datetime(2026, 11, 22, 2, 36, 14, tzinfo=UTC)
    with pytest.raises(ValueError, match="ISO"):
        parse_time("yesterday")
    with pytest.raises(ValueError, match="not before"):
        TimeWindow(parse_time("2026-11-22"), parse_time("2026-11-21"))
    assert TimeWindow().is_open


@pytest.fixture(scope="module")
def sample_lake(spark, tmp_path_factory) -> Lake:
    return shared_sample_lake(tmp_path_factory)


@pytest.mark.spark
def test_a_young_lake_has_every_table_empty_with_its_schema(spark, tmp_path) -> None:
    session = spark.newSession()
    names = register_views(session, Lake(tmp_path / "no-tables-yet"))
    assert names == list(schemas.TABLES)
    for name in names:
        view = session.table(name)
        assert view.columns == list(schemas.load(name).column_names)
        assert view.isEmpty()


@pytest.mark.spark
def test_every_table_of_the_lake_is_a_view(spark, sample_lake) -> None:
    session = spark.newSession()
    assert table_names(sample_lake) == list(schemas.TABLES)
    register_views(session, sample_lake)
    sessions = sum(len(r["connections"]) for r in records())
    assert session.sql("SELECT count(*) AS n FROM sessions").first().n == sessions


@pytest.mark.spark
def test_a_window_keeps_the_traffic_inside_it(spark, sample_lake) -> None:
    """The window around one sample's connections keeps that sample only."""
    session = spark.newSession()
    register_views(session, sample_lake)
    record = next(r for r in records() if r["sample"] == "activemq-queues-acks")
    ports = [c["client_port"] for c in record["connections"]]
    # Times leave Spark as microseconds: collected timestamps would be in the local zone.
    bounds = session.sql(
        "SELECT unix_micros(min(started_at)) AS first, unix_micros(max(ended_at)) AS last "
        f"FROM sessions WHERE client_port IN ({', '.join(map(str, ports))})"
    ).first()
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    window = TimeWindow(
        epoch + timedelta(microseconds=bounds.first),
        epoch + timedelta(microseconds=bounds.last + 1),
    )
    inside = spark.newSession()
    register_views(inside, sample_lake, window)
    assert {r.client_port for r in inside.table("sessions").collect()} == set(ports)
    delivered = sum(len(c["messages_received"]) for c in record["connections"])
    messages = inside.sql("SELECT count(*) AS n FROM messages WHERE command = 'MESSAGE'").first()
    assert messages.n == delivered
    acks = sum(len(c["ack_ids_sent"]) + len(c["nack_ids_sent"]) for c in record["connections"])
    assert inside.table("acks").count() == acks
    before = spark.newSession()
    register_views(before, sample_lake, TimeWindow(until=window.since))
    assert before.table("messages").isEmpty()  # this sample is the earliest
    assert before.table("sessions").isEmpty()
