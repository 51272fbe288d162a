"""pipeline/validation/on_duckdb.py: the suites run by GX's SQL engine on a DuckDB database of
the batch's staged Parquet files (written with pyarrow here), the cross-table checks as tables.

The engine is driven as the gate drives it, without Spark: no open sessions (a Spark frame) and
no sample rows (``failing_rows`` samples the batch's Spark frames), which test_gate.py covers."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
import pytest
from deltalake import write_deltalake

import schemas
from pipeline.lake import Lake
from pipeline.lake.layout import DIR_MODE
from pipeline.validation import gx_context, local_sql
from pipeline.validation.on_duckdb import FOLDER, DuckDbEngine
from pipeline.validation.suites import (
    COUNTED_ROW_QUERY,
    CROSS_TABLE_SUITES,
    FILTER_ROW_QUERY,
    ROW_QUERY,
    SUITE_NAMES,
    SUITES_DIR_VARIABLE,
    suite_json,
)
from tests.pipeline.validation.batch_rows import SESSION, counts_of, good_batch, to_files

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Rows = dict[str, list[dict[str, Any]]]
BATCH_COUNTS = 'SELECT "table", table_rows FROM {batch_consistency} ORDER BY "table"'
KNOWN = "SELECT session_id FROM {known_sessions} ORDER BY session_id"
ROW_QUERIES = (BATCH_COUNTS, "SELECT count(*) AS n FROM {frames}")
BROKEN_BATCH_SUITES = ("acks", "frames", "receipts", "session_consistency")


class UntouchedSpark:
    """Stands for the run's SparkSession: the engine needs it only to sample failing rows."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"Spark was used: .{name}")


NO_FRAMES = cast("Mapping[str, DataFrame]", {})


def _engine(lake: Lake, rows: Rows, *, files: dict[str, list[Path]] | None = None) -> DuckDbEngine:
    if files is None:
        files = to_files(lake.root.parent / "files", rows)
    spark = cast("SparkSession", UntouchedSpark())
    return DuckDbEngine(spark, lake, "b1", NO_FRAMES, counts_of(rows), None, files)


def _publish_sessions(lake: Lake, *versions: list[str]) -> None:
    """Commits of the lake's sessions table, each replacing the last, by session id only."""
    for ids in versions:
        table = pa.table({"session_id": pa.array(ids, pa.string())})
        write_deltalake(str(lake.delta_path("sessions")), table, mode="overwrite")


@dataclass
class Validated:
    engine: DuckDbEngine
    context: Any
    results: dict[str, Any]
    rows_before_gx: list[list[dict[str, Any]]]  # of ROW_QUERIES, read before GX connected


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Validated]:
    """Every suite run on a good batch, in a lake with no sessions published before."""
    lake = Lake(tmp_path_factory.mktemp("good") / "lake").ensure()
    engine = _engine(lake, good_batch("b1"))
    try:
        engine.start_checks()
        before_gx = [engine.rows(query) for query in ROW_QUERIES]
        context = gx_context.new_context(lake, "b1")
        engine.define(context, SUITE_NAMES)
        results = {name: engine.run_suite(name, detailed=False) for name in SUITE_NAMES}
        yield Validated(engine, context, results, before_gx)
    finally:
        engine.close()


def _broken_rows() -> Rows:
    rows = good_batch("b1")
    rows["acks"][0]["latency_ms"] = -5.0  # a negative latency: ACK frame 7
    rows["frames"][7]["command"] = "ACKX"  # an unknown command with no violation recorded
    for session_id in ("published-before", "no-such-session"):
        rows["receipts"].append({**rows["receipts"][0], "session_id": session_id})
    return rows


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Validated]:
    """Some suites run on a broken batch, in a lake that published session
    ``published-before``; each result detailed (as the gate runs a failed suite again)."""
    lake = Lake(tmp_path_factory.mktemp("broken") / "lake").ensure()
    _publish_sessions(lake, ["published-before"])
    engine = _engine(lake, _broken_rows())
    try:
        engine.start_checks()
        context = gx_context.new_context(lake, "b1")
        engine.define(context, BROKEN_BATCH_SUITES)
        results = {name: engine.run_suite(name, detailed=True) for name in BROKEN_BATCH_SUITES}
        yield Validated(engine, context, results, [])
    finally:
        engine.close()


def test_nothing_runs_before_the_checks_are_started(tmp_path: Path) -> None:
    engine = _engine(Lake(tmp_path / "lake").ensure(), good_batch("b1"), files={})
    context = gx_context.new_context(engine.lake, "b1")
    with pytest.raises(RuntimeError, match="not started"):
        engine.define(context, ["acks"])
    with pytest.raises(RuntimeError, match="not started"):
        engine.run_suite("acks", detailed=False)
    with pytest.raises(RuntimeError, match="not started"):
        engine.rows("SELECT 1")
    engine.close()  # nothing to let go of
    assert not engine.folder.exists()


def test_the_checks_start_as_a_database_in_the_batchs_run_folder(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake").ensure()
    engine = _engine(lake, good_batch("b1"))
    try:
        started = engine.start_checks()
        assert started.done() and started.result() >= 0.0
        assert engine.folder == lake.runs_dir / "b1" / FOLDER
        assert stat.S_IMODE(engine.folder.stat().st_mode) == DIR_MODE
        assert engine.database is not None
        assert engine.database.path == engine.folder / local_sql.DATABASE_NAME
        assert engine.database.path.is_file()
        assert set(engine.database.columns) == set(SUITE_NAMES)
        assert engine.database.columns["acks"] == schemas.load("acks").column_names
    finally:
        engine.close()
    assert not engine.folder.exists()
    engine.close()  # again: nothing left, no error


def test_rows_are_the_same_read_alone_or_through_gx(good: Validated) -> None:
    assert good.engine.source is not None  # GX holds the database now
    through_gx = [good.engine.rows(query) for query in ROW_QUERIES]
    assert through_gx == good.rows_before_gx
    rows = good_batch("b1")
    batch_counts, frames = through_gx
    assert batch_counts == [
        {"table": t, "table_rows": len(rows[t])} for t in sorted(schemas.TABLES)
    ]
    assert frames == [{"n": len(rows["frames"])}]


def test_a_batch_without_files_is_validated_as_empty_tables(tmp_path: Path) -> None:
    engine = _engine(Lake(tmp_path / "lake").ensure(), good_batch("b1"), files={})
    try:
        engine.start_checks()
        counts = engine.rows(BATCH_COUNTS)
    finally:
        engine.close()
    assert [row["table"] for row in counts] == sorted(schemas.TABLES)
    assert {row["table_rows"] for row in counts} == {0}


@pytest.mark.parametrize("name", SUITE_NAMES)
def test_every_suite_passes_on_a_good_batch(good: Validated, name: str) -> None:
    result = good.results[name]
    failed = [r.expectation_config.type for r in result.results if not r.success]
    assert result.success, failed
    assert len(result.results) == len(suite_json(name)["expectations"])


def test_suites_run_with_their_filtering_row_queries_folded(good: Validated) -> None:
    for name in SUITE_NAMES:
        stored = [e["type"] for e in suite_json(name)["expectations"]]
        ran = [e.expectation_type for e in good.context.suites.get(name).expectations]
        assert ROW_QUERY not in ran, name
        assert ran.count(FILTER_ROW_QUERY) + ran.count(COUNTED_ROW_QUERY) == stored.count(ROW_QUERY)
    assert any(
        e.expectation_type == FILTER_ROW_QUERY for e in good.context.suites.get("acks").expectations
    )


def _failed(result: Any) -> dict[str, Any]:
    """The failed expectations of a result by their description (or their column)."""
    return {
        r.expectation_config.description or r.expectation_config.kwargs["column"]: r
        for r in result.results
        if not r.success
    }


def test_a_broken_batch_fails_the_expectations_it_breaks_and_no_other(broken: Validated) -> None:
    failed = {name: sorted(_failed(r)) for name, r in broken.results.items()}
    assert failed["acks"] == ["latency_ms"]
    [frames] = failed["frames"]
    assert frames.startswith("command is a STOMP command")
    assert failed["receipts"] == []  # an orphan is the cross-table suite's to catch
    [orphan] = failed["session_consistency"]
    assert orphan.startswith("every row's session_id is in sessions")


def test_a_detailed_run_names_the_failing_rows_by_the_relations_index_columns(
    broken: Validated,
) -> None:
    latency = _failed(broken.results["acks"])["latency_ms"].result
    assert latency["unexpected_count"] == 1
    assert latency["unexpected_index_column_names"] == ["session_id", "frame_index"]
    assert latency["partial_unexpected_index_list"] == [
        {"session_id": SESSION, "frame_index": 7, "latency_ms": -5.0}
    ]
    [orphan] = _failed(broken.results["session_consistency"]).values()
    assert orphan.result["unexpected_index_column_names"] == ["session_id"]  # a row a session
    assert orphan.result["partial_unexpected_index_list"] == [
        {"session_id": "no-such-session", "known_session": False}
    ]


def test_sessions_of_the_published_snapshot_are_known(
    broken: Validated, good: Validated, tmp_path: Path
) -> None:
    assert broken.engine.rows(KNOWN) == [{"session_id": "published-before"}]
    assert good.engine.rows(KNOWN) == []  # no sessions table yet
    lake = Lake(tmp_path / "lake").ensure()
    _publish_sessions(lake, ["replaced-1", "replaced-2"], ["current"])
    engine = _engine(lake, good_batch("b1"), files={})
    try:
        engine.start_checks()
        assert engine.rows(KNOWN) == [{"session_id": "current"}]  # only the current files
    finally:
        engine.close()


def test_a_row_filter_duckdb_cannot_bind_fails_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Folded into the suite's aggregate query, a condition DuckDB cannot bind would break
    every expectation computed with it: it runs as a query of its own instead."""
    suite = {
        "name": "acks",
        "expectations": [
            {
                "type": ROW_QUERY,
                "kwargs": {"unexpected_rows_query": "SELECT * FROM {batch} WHERE latency_ms < 0"},
            },
            {
                "type": ROW_QUERY,
                "kwargs": {"unexpected_rows_query": "SELECT * FROM {batch} WHERE nope > 0"},
            },
            {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "session_id"}},
        ],
    }
    (tmp_path / "acks.json").write_text(json.dumps(suite))
    monkeypatch.setenv(SUITES_DIR_VARIABLE, str(tmp_path))
    lake = Lake(tmp_path / "lake").ensure()
    engine = _engine(lake, good_batch("b1"))
    try:
        engine.start_checks()
        context = gx_context.new_context(lake, "b1")
        engine.define(context, ["acks"])
        ran = [e.expectation_type for e in context.suites.get("acks").expectations]
        result = engine.run_suite("acks", detailed=False)
    finally:
        engine.close()
    assert not engine.folder.exists()  # GX's connections closed, then the database removed
    assert ran == [FILTER_ROW_QUERY, COUNTED_ROW_QUERY, "expect_column_values_to_not_be_null"]
    outcome = {
        r.expectation_config.kwargs.get("unexpected_rows_query", "not null"): r.success
        for r in result.results
    }
    assert outcome == {
        "SELECT * FROM {batch} WHERE latency_ms < 0": True,
        "SELECT * FROM {batch} WHERE nope > 0": False,
        "not null": True,
    }


def test_the_cross_table_suites_read_the_checks_tables(good: Validated) -> None:
    for name in CROSS_TABLE_SUITES:
        assert good.engine.rows(f"SELECT count(*) AS n FROM {{{name}}}")[0]["n"] > 0
        assert good.results[name].results  # each of their expectations evaluated
