"""pipeline/validation/on_spark.py: the suites' engine on Spark, driven directly (the gate's runs
through it are in test_gate.py, its check rows against DuckDB's in test_checks.py): which check
frames it holds and for how long, queries and failing rows over its tables and checks, a suite
run on a session of its own, and the row filters it resolves without a job.

The checks cost seconds on Spark: one engine makes them for the whole module (`checked`)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from pyspark.sql.types import StringType, StructField, StructType

import schemas
from pipeline.lake.layout import Lake
from pipeline.lake.reader import local_frame
from pipeline.validation import gx_context
from pipeline.validation.on_spark import COMPUTED_NOW, SparkEngine, resolved_on
from tests.pipeline.validation.batch_rows import SESSION, counts_of, good_batch

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

Rows = dict[str, list[dict[str, Any]]]
FROM_FILES = "transactions"  # the table `checked` reads from Parquet files


def _broken_rows() -> Rows:
    """The sample batch with a negative ack latency and a negative anomaly stream offset."""
    rows = good_batch("b1")
    rows["acks"][0]["latency_ms"] = -5.0
    rows["anomalies"][0]["stream_offset"] = -1
    return rows


def _frames(spark: SparkSession, rows: Rows) -> dict[str, DataFrame]:
    """Every table's rows as a relation held in the JVM (no Python task reads them again)."""
    found = {}
    for table in schemas.TABLES:
        schema = schemas.load(table).spark_schema()
        values = [tuple(row[c] for c in schema.fieldNames()) for row in rows[table]]
        found[table] = local_frame(spark, values, schema)
    return found


@dataclass(frozen=True, slots=True)
class Checked:
    engine: SparkEngine
    rows: Rows
    counts: dict[str, Any]
    stored: Path  # the Parquet files of the table FROM_FILES


@pytest.fixture(scope="module")
def checked(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Checked]:
    """An engine whose checks are made, over the broken batch with one counter off (frames);
    its table FROM_FILES read from files that one test removes."""
    folder = tmp_path_factory.mktemp("on-spark")
    rows = _broken_rows()
    counts = {**counts_of(rows), "frames": len(rows["frames"]) + 1}
    tables = _frames(spark, rows)
    stored = folder / FROM_FILES
    tables[FROM_FILES].write.parquet(str(stored))
    schema = schemas.load(FROM_FILES).spark_schema()
    tables[FROM_FILES] = spark.read.schema(schema).parquet(str(stored))
    engine = SparkEngine(spark, Lake(folder / "lake").ensure(), "b1", tables, counts, None)
    assert engine.start_checks().result() >= 0  # the seconds it took
    yield Checked(engine, rows, counts, stored)
    engine.close()


def test_the_batch_check_is_held_in_the_jvm_and_the_session_check_cached_until_close(
    checked: Checked,
) -> None:
    engine = checked.engine
    assert COMPUTED_NOW == ("batch_consistency",)
    assert not engine.checks["batch_consistency"].is_cached  # its rows, not a plan to cache
    assert engine.checks["session_consistency"].is_cached  # computed by its first query
    shutil.rmtree(checked.stored)  # the batch check read them when it was made
    by_table = {r["table"]: r for r in engine.rows("SELECT * FROM {batch_consistency}")}
    assert by_table[FROM_FILES]["table_rows"] == len(checked.rows[FROM_FILES]) > 0
    engine.close()
    assert not engine.checks["session_consistency"].is_cached
    engine.close()  # again: nothing more to let go of


def test_rows_answer_a_query_over_the_tables_as_plain_values(checked: Checked) -> None:
    [row] = checked.engine.rows(
        "SELECT count(*) AS sent, max(named_struct('command', command, 'offset', stream_offset))"
        " AS last FROM {frames} WHERE direction = 'c2s'"
    )
    sent = [f for f in checked.rows["frames"] if f["direction"] == "c2s"]
    assert row["sent"] == len(sent)
    last = max(sent, key=lambda f: (f["command"], f["stream_offset"]))
    assert row["last"] == {"command": last["command"], "offset": last["stream_offset"]}


def test_rows_may_name_the_known_sessions(spark: SparkSession, tmp_path: Path) -> None:
    """As DuckDB's engine: the sessions published before and those carried still open."""
    rows = good_batch("b1")
    still_open = local_frame(
        spark, [("s-open",)], StructType([StructField("session_id", StringType())])
    )
    lake = Lake(tmp_path / "lake").ensure()
    engine = SparkEngine(spark, lake, "b1", _frames(spark, rows), counts_of(rows), still_open)
    found = engine.rows("SELECT session_id FROM {known_sessions}")
    assert [r["session_id"] for r in found] == ["s-open"]


def test_failing_rows_come_from_the_table_or_the_check_of_that_name(checked: Checked) -> None:
    engine = checked.engine
    between = {"column": "latency_ms", "min_value": 0}
    [ack] = engine.failing_rows("acks", "expect_column_values_to_be_between", between, 5)
    assert (ack["session_id"], ack["frame_index"], ack["latency_ms"]) == (
        SESSION,
        checked.rows["acks"][0]["frame_index"],
        -5.0,
    )
    pair = {"column_A": "table_rows", "column_B": "run_counter"}
    [table] = engine.failing_rows(
        "batch_consistency", "expect_column_pair_values_to_be_equal", pair, 5
    )
    assert (table["table"], table["table_rows"], table["run_counter"]) == (
        "frames",
        len(checked.rows["frames"]),
        checked.counts["frames"],
    )


def test_failing_rows_stop_at_the_limit(checked: Checked) -> None:
    every_frame = {"unexpected_rows_query": "SELECT * FROM {batch} WHERE frame_index >= 0"}
    found = checked.engine.failing_rows("frames", "unexpected_rows_expectation", every_frame, 2)
    assert len(found) == 2 < len(checked.rows["frames"])


def _global_views(spark: SparkSession) -> list[str]:
    database = spark.conf.get("spark.sql.globalTempDatabase", "global_temp")
    return sorted(t.name for t in spark.catalog.listTables(database))


def test_a_failing_suite_names_its_rows_by_index_columns_it_does_not_check(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The anomalies suite never names session_id: the engine reads it for the report all the
    same, and leaves no view, job description or session of its own behind."""
    rows = _broken_rows()
    lake = Lake(tmp_path / "lake").ensure()
    engine = SparkEngine(spark, lake, "b1", _frames(spark, rows), counts_of(rows), None)
    views = _global_views(spark)
    try:
        engine.define(gx_context.new_context(lake, "b1"), ["anomalies"])
        result = engine.run_suite("anomalies", detailed=True)
    finally:
        engine.close()
    assert not result.success
    [failed] = [r for r in result.results if not r.success]
    assert failed.expectation_config.kwargs["column"] == "stream_offset"
    assert failed.result["partial_unexpected_index_list"] == [
        {"session_id": SESSION, "stream_offset": -1}
    ]
    assert _global_views(spark) == views
    assert spark.sparkContext.getLocalProperty("spark.job.description") is None


def test_row_filters_resolve_without_a_job_and_only_as_row_conditions(spark: SparkSession) -> None:
    from pyspark.sql import functions as F

    never_read = spark.range(1).select(
        F.col("id").alias("a"), F.expr("raise_error('a job read the rows')").alias("b")
    )
    row_conditions = ["a > 0", "b IS NULL"]
    not_row_conditions = ["a + 1", "count(a) > 0", "max(a) OVER () > 0"]
    resolved = resolved_on(never_read, [*row_conditions, *not_row_conditions])
    assert resolved == frozenset(row_conditions)


def test_checks_that_fail_are_reported_by_their_future_not_by_close(
    spark: SparkSession, tmp_path: Path
) -> None:
    rows = good_batch("b1")
    tables = {t: f for t, f in _frames(spark, rows).items() if t != "acks"}
    engine = SparkEngine(spark, Lake(tmp_path / "lake").ensure(), "b1", tables, {}, None)
    done = engine.start_checks()
    engine.close()  # waits for them
    assert done.done() and isinstance(done.exception(), KeyError)
    assert engine.checks == {}
