"""pipeline/validation/local_checks.py: DuckDB's cross-table check relations hold the same rows
as Spark's check frames (pipeline/validation/checks.py), on a good batch and on batches broken
in every way the checks look for, with sessions published before and still open."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.validation import checks
from pipeline.validation.local_checks import CheckInputs
from pipeline.validation.local_sql import create_database
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


def _broken() -> tuple[dict[str, list[dict]], dict[str, Any]]:
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


def _cases() -> list[tuple[str, dict[str, list[dict]], dict[str, Any]]]:
    good = good_batch("b1")
    broken, counts = _broken()
    no_capture = {**counts_of(good), "capture_last_ns": None}
    lagging = good_batch("b1")
    with_lagging_consumer(lagging)
    backfill = good_batch("b1")
    with_connection_carried_from_a_later_capture(backfill)
    return [
        ("good", good, counts_of(good)),
        ("broken", broken, counts),
        ("no_packets", good, no_capture),
        ("lagging", lagging, counts_of(lagging)),
        ("backfill", backfill, counts_of(backfill)),
    ]


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


@pytest.mark.parametrize("name", ["good", "broken", "no_packets", "lagging", "backfill"])
def test_duckdb_checks_hold_the_rows_of_spark_checks(spark, tmp_path: Path, name: str) -> None:
    [(_, rows, counts)] = [c for c in _cases() if c[0] == name]
    published = tmp_path / "published.parquet"
    pq.write_table(pa.table({"session_id": ["published-before", "other"]}), published)
    frames = to_frames(spark, rows)
    known = spark.createDataFrame(
        [("published-before",), ("other",), ("still-open",)], "session_id string"
    )
    spark_sessions = checks.session_checks(frames, known, counts.get("capture_last_ns"))
    spark_batch = checks.batch_checks(spark, frames, counts)

    inputs = CheckInputs([str(published)], ["still-open"], counts, counts.get("capture_last_ns"))
    folder = tmp_path / "db"
    folder.mkdir()
    database = create_database(folder, to_files(tmp_path / "files", rows), inputs)
    with duckdb.connect(str(database.path), read_only=True) as db:
        local_sessions = db.table("session_consistency").to_arrow_table().to_pylist()
        local_batch = db.table("batch_consistency").to_arrow_table().to_pylist()

    _same([r.asDict() for r in spark_sessions.collect()], local_sessions)
    _same([r.asDict() for r in spark_batch.collect()], local_batch)
    if name == "broken":  # the case breaks what it means to
        by_id = {r["session_id"]: r for r in local_sessions}
        assert not by_id["nobody"]["known_session"]
        assert by_id["published-before"]["known_session"]
        assert by_id["still-open"]["known_session"]
        assert any(r["heartbeats_off_interval"] for r in local_sessions)
        assert any(r["rows_outside_session"] for r in local_sessions)
        assert any(r["rows_after_capture"] for r in local_sessions)
    if name == "lagging":  # the acks naming MESSAGEs given up are not counted as could-resolve
        [acks] = [r for r in local_batch if r["table"] == "acks"]
        assert acks["acks_total"] == 1 and acks["resolved_share"] == 1.0
    if name == "backfill":  # the carried connection's later times are not after the capture
        by_id = {r["session_id"]: r for r in local_sessions}
        assert by_id[CARRIED]["rows_after_capture"] == 0
        assert by_id[CARRIED]["rows_outside_session"] == 0
