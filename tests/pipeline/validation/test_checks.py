from __future__ import annotations

import pytest

import schemas
from pipeline.validation.checks import batch_checks, session_checks
from tests.pipeline.lake.conftest import runs_python
from tests.pipeline.validation.batch_rows import (
    CARRIED,
    counts_of,
    good_batch,
    to_frames,
    with_connection_carried_from_a_later_capture,
    with_lagging_consumer,
)

pytestmark = pytest.mark.spark


def test_batch_checks_count_every_table_against_the_runs_counters(spark) -> None:
    rows = good_batch("b1")
    counts = {**counts_of(rows), "frames": len(rows["frames"]) + 1, "errors": True}
    checks = batch_checks(spark, to_frames(spark, rows), counts)
    assert not runs_python(checks)  # a relation in the JVM: its suite's queries start no Python
    found = {r["table"]: r.asDict() for r in checks.collect()}
    assert list(found) == list(schemas.TABLES)
    for table, row in found.items():
        assert row["table_rows"] == len(rows[table]), table
    assert found["frames"]["run_counter"] == len(rows["frames"]) + 1
    assert found["errors"]["run_counter"] is None  # not a counter
    acks = found["acks"]
    assert acks["acks_total"] == len(rows["acks"])
    resolved = sum(1 for r in rows["acks"] if r["delivered_at_ns"] is not None)
    assert acks["resolved_share"] == resolved / len(rows["acks"])
    assert all(found[t]["acks_total"] is None for t in schemas.TABLES if t != "acks")


def test_acks_of_messages_given_up_are_left_out_of_the_resolved_share(spark) -> None:
    rows = good_batch("b1")
    with_lagging_consumer(rows, lagging=40)
    checks = batch_checks(spark, to_frames(spark, rows), counts_of(rows))
    [acks] = [r for r in checks.collect() if r["table"] == "acks"]
    assert acks["table_rows"] == 41  # every ACK frame is still a row
    assert acks["acks_total"] == 1 and acks["resolved_share"] == 1.0


def test_a_connection_carried_from_a_later_capture_is_not_after_this_capture(spark) -> None:
    rows = good_batch("b1")
    with_connection_carried_from_a_later_capture(rows)
    counts = counts_of(rows)
    known = spark.createDataFrame([], "session_id string")
    found = {
        r["session_id"]: r
        for r in session_checks(to_frames(spark, rows), known, counts["capture_last_ns"]).collect()
    }
    assert found[CARRIED]["rows_after_capture"] == 0
    assert found[CARRIED]["rows_outside_session"] == 0 and found[CARRIED]["known_session"]
