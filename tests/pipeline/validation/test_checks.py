"""pipeline/validation/checks.py: the cross-table checks, one SQL text run by both engines
(Spark SQL over the batch's frames, DuckDB over its files), give the same rows, on a good batch
and on batches broken in every way the checks look for, with sessions published before and
still open."""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import schemas
from pipeline.lake import Lake, begin_batch, finish_batch, write_table_batch
from pipeline.validation.engine import SuiteEngine, open_engine
from tests.pipeline.validation.batch_rows import (
    CARRIED,
    at,
    counts_of,
    good_batch,
    to_files,
    to_frames,
    with_connection_carried_from_a_later_capture,
    with_lagging_consumer,
)

pytestmark = pytest.mark.spark

ENGINES = ("spark", "duckdb")
Rows = dict[str, list[dict[str, Any]]]


def _broken() -> tuple[Rows, dict[str, Any]]:
    rows = good_batch("b1")
    rows["heartbeats"][1].update(expected_ms=20)  # not the negotiated interval
    rows["frames"][10]["ts_end_ns"] = at(31)[1]  # ends after its session
    orphan = copy.deepcopy(rows["receipts"][0])
    orphan["session_id"] = "published-before"
    rows["receipts"].append(orphan)  # known: published by an earlier batch
    stray = copy.deepcopy(rows["receipts"][0])
    stray["session_id"] = "still-open"
    rows["receipts"].append(stray)  # known: open at the end of the batch
    unknown = copy.deepcopy(rows["acks"][0])
    unknown["session_id"] = "nobody"
    rows["acks"].append(unknown)  # an orphan
    rows["frames"] = rows["frames"][1:]  # the session's first frame is in an earlier batch
    counts = {**counts_of(rows), "frames": 99, "capture_last_ns": at(25)[1]}
    return rows, counts


def _case(name: str) -> tuple[Rows, dict[str, Any]]:
    if name == "broken":
        return _broken()
    rows = good_batch("b1")
    if name == "lagging":
        with_lagging_consumer(rows)
    if name == "backfill":
        with_connection_carried_from_a_later_capture(rows)
    counts = counts_of(rows)
    if name == "no_packets":
        counts["capture_last_ns"] = None
    return rows, counts


def _published(spark, lake: Lake) -> None:
    """Sessions ``published-before`` and ``other`` committed by an earlier batch."""
    [session] = good_batch("b0")["sessions"]
    rows = [{**session, "session_id": sid} for sid in ("published-before", "other")]
    schema = schemas.load("sessions")
    begin_batch(lake, (), batch_id="b0")
    write_table_batch(
        spark.createDataFrame(rows, schema.spark_schema()),
        lake,
        "sessions",
        schema=schema.spark_schema(),
        partition_by=list(schema.partition_by),
        batch_id="b0",
    )
    finish_batch(lake, "b0")


@contextmanager
def _checked(
    spark, tmp_path: Path, engine_name: str, rows: Rows, counts: dict[str, Any]
) -> Iterator[SuiteEngine]:
    lake = Lake(tmp_path / engine_name / "lake").ensure()
    _published(spark, lake)
    local_files = None
    if engine_name == "duckdb":
        local_files = to_files(tmp_path / engine_name / "files", rows)
    engine = open_engine(
        spark,
        lake,
        "b1",
        to_frames(spark, rows),
        counts,
        open_sessions=spark.createDataFrame([("still-open",)], "session_id string"),
        local_files=local_files,
    )
    try:
        engine.start_checks().result()
        yield engine
    finally:
        engine.close()


def _checks(
    spark, tmp_path: Path, engine_name: str, rows: Rows, counts: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rows of ``session_consistency`` and of ``batch_consistency`` on the engine."""
    with _checked(spark, tmp_path, engine_name, rows, counts) as engine:
        sessions = engine.rows("SELECT * FROM {session_consistency}")
        batch = engine.rows("SELECT * FROM {batch_consistency}")
    return sessions, batch


def _same(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> None:
    def key(row: dict[str, Any]) -> tuple[str, ...]:
        return tuple(str(v) for v in row.values())

    assert len(a) == len(b)
    for left, right in zip(sorted(a, key=key), sorted(b, key=key), strict=True):
        assert left.keys() == right.keys()
        for name, value in left.items():
            other = right[name]
            if isinstance(value, float) and isinstance(other, float):
                assert math.isclose(value, other), (name, left, right)
            else:
                assert value == other, (name, left, right)


@pytest.mark.parametrize("case", ["good", "broken", "no_packets", "lagging", "backfill"])
def test_both_engines_give_the_same_rows(spark, tmp_path: Path, case: str) -> None:
    rows, counts = _case(case)
    on_spark = _checks(spark, tmp_path, "spark", rows, counts)
    on_duckdb = _checks(spark, tmp_path, "duckdb", rows, counts)
    _same(on_spark[0], on_duckdb[0])
    _same(on_spark[1], on_duckdb[1])


@pytest.mark.parametrize("engine", ENGINES)
def test_batch_checks_count_every_table_against_the_runs_counters(
    spark, tmp_path: Path, engine: str
) -> None:
    rows = good_batch("b1")
    counts = {**counts_of(rows), "frames": len(rows["frames"]) + 1, "errors": True}
    _, batch = _checks(spark, tmp_path, engine, rows, counts)
    found = {r["table"]: r for r in batch}
    assert [r["table"] for r in batch] == list(schemas.TABLES)  # in the tables' order
    for table, row in found.items():
        assert row["table_rows"] == len(rows[table]), table
    assert found["frames"]["run_counter"] == len(rows["frames"]) + 1
    assert found["errors"]["run_counter"] is None  # not a counter
    acks = found["acks"]
    assert acks["acks_total"] == len(rows["acks"])
    resolved = sum(1 for r in rows["acks"] if r["delivered_at_ns"] is not None)
    assert acks["resolved_share"] == resolved / len(rows["acks"])
    assert all(found[t]["acks_total"] is None for t in schemas.TABLES if t != "acks")
    assert all(found[t]["resolved_share"] is None for t in schemas.TABLES if t != "acks")


@pytest.mark.parametrize("engine", ENGINES)
def test_acks_of_messages_given_up_are_left_out_of_the_resolved_share(
    spark, tmp_path: Path, engine: str
) -> None:
    rows = good_batch("b1")
    with_lagging_consumer(rows, lagging=40)
    _, batch = _checks(spark, tmp_path, engine, rows, counts_of(rows))
    [acks] = [r for r in batch if r["table"] == "acks"]
    assert acks["table_rows"] == 41  # every ACK frame is still a row
    assert acks["acks_total"] == 1 and acks["resolved_share"] == 1.0


@pytest.mark.parametrize("engine", ENGINES)
def test_a_connection_carried_from_a_later_capture_is_not_after_this_capture(
    spark, tmp_path: Path, engine: str
) -> None:
    rows, counts = _case("backfill")
    sessions, _ = _checks(spark, tmp_path, engine, rows, counts)
    found = {r["session_id"]: r for r in sessions}
    assert found[CARRIED]["rows_after_capture"] == 0
    assert found[CARRIED]["rows_outside_session"] == 0 and found[CARRIED]["known_session"]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_broken_batch_breaks_what_it_means_to(spark, tmp_path: Path, engine: str) -> None:
    rows, counts = _broken()
    sessions, _ = _checks(spark, tmp_path, engine, rows, counts)
    by_id = {r["session_id"]: r for r in sessions}
    assert not by_id["nobody"]["known_session"]
    assert by_id["published-before"]["known_session"]
    assert by_id["still-open"]["known_session"]
    assert any(r["heartbeats_off_interval"] for r in sessions)
    assert any(r["rows_outside_session"] for r in sessions)
    assert any(r["rows_after_capture"] for r in sessions)
