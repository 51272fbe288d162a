from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

import schemas
from pipeline.lake import Lake, begin_batch, finish_batch, write_table_batch
from pipeline.lake.reader import read_table
from pipeline.lake.staged_tables import read_all_staged
from pipeline.lake.staging import discard_staged
from pipeline.validation.gate import ValidationFailed, validate_batch
from pipeline.validation.quarantine import list_quarantined, release_batch
from pipeline.validation.suites import SUITE_NAMES
from tests.pipeline.validation.batch_rows import (
    SESSION,
    at,
    counts_of,
    good_batch,
    to_files,
    to_frames,
    to_staged,
    with_connection_carried_from_a_later_capture,
    with_duplicate_message_id,
    with_lagging_consumer,
)

# A good and a broken batch are validated on both engines: the tables' suites on Spark, or on
# DuckDB over the batch's files (the cross-table checks then too); the outcomes must be the same.
# The other cases run on DuckDB only, the engine of local runs: the gate around the engine is
# the same code, and `test_checks.py` holds the engines' cross-table rows to each other.
ENGINES = ("spark", "duckdb")


def _files(engine: str, folder: Path, rows: dict[str, list[dict]]) -> dict[str, list[Path]] | None:
    return to_files(folder / "files", rows) if engine == "duckdb" else None


@pytest.mark.parametrize("engine", ENGINES)
def test_good_batch_passes_and_records_its_result(spark, tmp_path: Path, engine: str) -> None:
    lake = Lake(tmp_path / "lake").ensure()
    rows = good_batch("b1")
    report = validate_batch(
        spark,
        lake,
        "b1",
        to_frames(spark, rows),
        counts_of(rows),
        local_files=_files(engine, tmp_path, rows),
    )

    assert report.success, report.describe()
    assert report.failures == []
    assert len(report.outcomes) > 100
    saved = json.loads(report.result_path.read_text())
    assert saved["success"] is True and saved["failed"] == 0
    assert report.docs_index is not None and report.docs_index.is_file()
    assert list_quarantined(lake) == []


def _broken(batch_id: str) -> dict[str, list[dict]]:
    rows = good_batch(batch_id)
    rows["acks"][0]["latency_ms"] = -5.0  # a negative latency
    rows["frames"][7]["command"] = "ACKX"  # an unknown command with no violation recorded
    orphan = copy.deepcopy(rows["errors"] or rows["receipts"])
    orphan[0]["session_id"] = "no-such-session"
    rows["receipts"].extend(orphan)  # an orphan session id
    return rows


def _failed(report) -> set[tuple[str, str]]:
    return {(f.suite, f.description) for f in report.failures}


@pytest.mark.parametrize("engine", ENGINES)
def test_broken_batch_is_caught_by_the_right_expectations_and_quarantined(
    spark, tmp_path: Path, engine: str
) -> None:
    lake = Lake(tmp_path / "lake").ensure()
    good = good_batch("b1")
    begin_batch(lake, (), batch_id="b1")
    for table, frame in to_frames(spark, good).items():
        schema = schemas.load(table)
        write_table_batch(
            frame,
            lake,
            table,
            schema=schema.spark_schema(),
            partition_by=list(schema.partition_by),
            batch_id="b1",
        )
    finish_batch(lake, "b1")
    before = {t: read_table(spark, lake, t).count() for t in schemas.TABLES}

    rows = _broken("b2")
    counts = counts_of(rows)
    with pytest.raises(ValidationFailed) as caught:
        validate_batch(
            spark,
            lake,
            "b2",
            to_frames(spark, rows),
            counts,
            local_files=_files(engine, tmp_path, rows),
        )
    report = caught.value.report
    assert not (lake.runs_dir / "b2" / "duckdb").exists()  # DuckDB's database is removed

    failed = _failed(report)
    by_column = {(f.suite, f.expectation, f.description.split(",")[0]) for f in report.failures}
    assert ("acks", "expect_column_values_to_be_between", "column=latency_ms") in by_column
    assert (
        "frames",
        "command is a STOMP command, or the frame records an unknown_command violation",
    ) in failed
    assert any(s == "session_consistency" and "session_id is in sessions" in d for s, d in failed)
    assert len(report.failures) == 3, report.describe()

    message = str(caught.value)
    assert "ACKX" in message  # the whole offending frame row is shown
    assert "no-such-session" in message
    assert "-5.0" in message
    assert str(report.quarantine_path) in message and "index.html" in message

    [quarantined] = list_quarantined(lake)
    assert quarantined.batch_id == "b2" and not quarantined.released
    assert len(quarantined.failed) == 3
    report_json = json.loads((quarantined.path / "report.json").read_text())
    assert report_json["failed"] == 3
    assert spark.read.parquet(str(quarantined.path / "receipts")).count() == 2
    assert {t: read_table(spark, lake, t).count() for t in schemas.TABLES} == before

    begin_batch(lake, (), batch_id="b2")
    versions = release_batch(lake, "b2", lambda: spark)
    assert set(versions) == set(schemas.TABLES)
    assert read_table(spark, lake, "receipts").count() == before["receipts"] + 2
    assert list_quarantined(lake)[0].released
    released = read_table(spark, lake, "receipts").where(f"session_id = '{SESSION}'")
    assert released.count() == 2


@pytest.mark.parametrize("engine", ["duckdb"])
def test_cross_table_breakage_is_caught_by_the_right_expectations(
    spark, tmp_path: Path, engine: str
) -> None:
    rows = good_batch("b1")
    rows["heartbeats"][1].update(expected_ms=20, lateness_ms=-10.0)  # the session negotiated 10
    _, after_end = at(31)
    rows["frames"][10]["ts_end_ns"] = after_end  # the RECEIPT ends after its session
    counts = counts_of(rows)
    counts["frames"] += 1  # the run counted a frame the table lacks
    counts["capture_last_ns"] = at(25)[1]  # the session ends after the capture's last packet

    with pytest.raises(ValidationFailed) as caught:
        validate_batch(
            spark,
            Lake(tmp_path / "lake").ensure(),
            "b1",
            to_frames(spark, rows),
            counts,
            build_docs=False,
            local_files=_files(engine, tmp_path, rows),
        )

    assert _failed(caught.value.report) == {
        ("batch_consistency", "row counts match the run's own counters"),
        ("session_consistency", "a heart-beat's expected_ms is its session's negotiated interval"),
        ("session_consistency", "frames and heart-beats lie inside their session's lifetime"),
        (
            "session_consistency",
            "nothing is later than the batch's last captured packet (but a connection carried "
            "from a later capture)",
        ),
    }


def test_suites_in_flight_query_their_own_session(spark, tmp_path: Path, monkeypatch) -> None:
    # GX names every query's temp view `tmp_view`: suites run side by side only because each
    # engine's session is the one that owns the frame it checks, never the shared session.
    from great_expectations.execution_engine import SparkDFExecutionEngine

    seen: list[tuple[int, bool, bool]] = []
    compute_domain = SparkDFExecutionEngine.get_compute_domain

    def spy(self, *args, **kwargs):
        frame, *rest = compute_domain(self, *args, **kwargs)
        seen.append((id(self), self.spark is frame.sparkSession, self.spark is spark))
        return (frame, *rest)

    monkeypatch.setattr(SparkDFExecutionEngine, "get_compute_domain", spy)
    lake = Lake(tmp_path / "lake").ensure()
    rows = good_batch("b1")
    report = validate_batch(
        spark, lake, "b1", to_frames(spark, rows), counts_of(rows), build_docs=False
    )

    assert report.success, report.describe()
    assert len({engine for engine, _, _ in seen}) == len(SUITE_NAMES)
    assert all(owns for _, owns, _ in seen)
    assert not any(shared for _, _, shared in seen)


def test_row_filters_spark_cannot_resolve_are_left_out_and_the_others_kept(spark) -> None:
    from pipeline.validation.on_spark import resolved_on as _resolved_on

    frame = spark.createDataFrame([(1, "a")], "a long, b string")
    good = ["a < 0", "b IS NULL AND a > 1", "length(b) > 3"]
    assert _resolved_on(frame, good) == frozenset(good)
    bad = ["no_such_column > 0", "a <", "no_such_function(a)"]
    assert _resolved_on(frame, [*good, *bad]) == frozenset(good)
    assert _resolved_on(frame, bad) == frozenset()
    assert _resolved_on(frame, []) == frozenset()


def test_gx_context_keeps_its_configuration_without_writing_it_out(
    tmp_path: Path, monkeypatch
) -> None:
    from great_expectations.data_context.types.base import BaseYamlConfig

    from pipeline.validation.gx_context import new_context as _context

    written: list[str] = []
    to_yaml = BaseYamlConfig.to_yaml_str

    def counted(self: BaseYamlConfig) -> str:
        written.append(type(self).__name__)
        return to_yaml(self)

    monkeypatch.setattr(BaseYamlConfig, "to_yaml_str", counted)
    context = _context(Lake(tmp_path / "lake").ensure(), "b1")
    source = context.data_sources.add_spark("frames_source", persist=False)
    source.add_dataframe_asset("frames")

    assert written == []
    assert context.variables.progress_bars.globally is False
    site = context.variables.data_docs_sites["local_site"]
    assert site["store_backend"]["base_directory"] == str(tmp_path / "lake" / "docs" / "b1")
    assert context.data_sources.get("frames_source").get_asset("frames").name == "frames"


def test_a_suite_costs_the_rows_it_reads() -> None:
    from pipeline.validation.scheduling import expected_cost

    counts = {"frames": 900, "acks": 10, "sessions": "n/a"}
    assert expected_cost("session_consistency", counts) == 900
    assert expected_cost("acks", counts) == 10
    assert expected_cost("sessions", counts) == expected_cost("receipts", counts) == 0


def test_suites_run_costliest_first_and_held_ones_once_released() -> None:
    from concurrent.futures import Future

    from pipeline.validation.scheduling import costliest_first as _costliest_first

    checks: Future[None] = Future()
    started: list[str] = []
    released: list[bool] = []

    def run(name: str) -> str:
        started.append(name)
        if name == "a":  # the checks end while a table's suite runs
            checks.set_result(None)
        if name == "cross":
            assert released
        return name

    order = ["cross", "a", "b", "c"]
    finished = _costliest_first(
        run, order, 1, held=("cross",), until=checks, then=lambda: released.append(True)
    )
    assert sorted(finished) == sorted(order)
    # "cross" waited for the checks while the next one ran, then came first again
    assert started == ["a", "cross", "b", "c"]


def test_suites_run_no_more_at_once_than_threads() -> None:
    import threading
    import time
    from concurrent.futures import Future

    from pipeline.validation.scheduling import costliest_first as _costliest_first

    checks: Future[None] = Future()
    checks.set_result(None)
    lock = threading.Lock()
    in_flight = [0, 0]  # now, most

    def run(name: str) -> str:
        with lock:
            in_flight[0] += 1
            in_flight[1] = max(in_flight)
        time.sleep(0.01)
        with lock:
            in_flight[0] -= 1
        return name

    names = [f"suite{i}" for i in range(9)]
    finished = _costliest_first(run, names, 3, held=(), until=checks, then=lambda: None)
    assert sorted(finished) == names
    assert in_flight[1] == 3


def _misbehaving(case: str) -> dict[str, list[dict]]:
    rows = good_batch("b1")
    {
        "duplicate_message_id": with_duplicate_message_id,
        "lagging_consumer": with_lagging_consumer,
        "carried_from_a_later_capture": with_connection_carried_from_a_later_capture,
    }[case](rows)
    return rows


@pytest.mark.parametrize("engine", ["duckdb"])
@pytest.mark.parametrize(
    "case", ["duplicate_message_id", "lagging_consumer", "carried_from_a_later_capture"]
)
def test_traffic_that_misbehaves_passes_validation(
    spark, tmp_path: Path, engine: str, case: str
) -> None:
    """What clients and brokers do on the wire is data (anomaly rows), never a quarantine."""
    lake = Lake(tmp_path / "lake").ensure()
    rows = _misbehaving(case)
    report = validate_batch(
        spark,
        lake,
        "b1",
        to_frames(spark, rows),
        counts_of(rows),
        build_docs=False,
        local_files=_files(engine, tmp_path, rows),
    )
    assert report.success, report.describe()
    assert list_quarantined(lake) == []


@pytest.mark.parametrize("engine", ["duckdb"])
def test_quarantine_moves_the_staged_files_and_release_commits_them_without_spark(
    spark, tmp_path: Path, engine: str
) -> None:
    lake = Lake(tmp_path / "lake").ensure()
    begin_batch(lake, (), batch_id="b2")
    rows = _broken("b2")
    staged = to_staged(lake, "b2", rows)
    placed = {
        (table, f.path): os.stat(batch.table_path / f.path).st_ino
        for table, batch in staged.items()
        for f in batch.files
    }
    assert placed
    frames = read_all_staged(spark, staged)
    local_files = {t: [b.table_path / f.path for f in b.files] for t, b in staged.items()}
    with pytest.raises(ValidationFailed) as caught:
        validate_batch(
            spark,
            lake,
            "b2",
            frames,
            counts_of(rows),
            build_docs=False,
            local_files=local_files if engine == "duckdb" else None,
            staged=staged,
        )
    folder = caught.value.report.quarantine_path
    assert folder is not None
    for (table, path), inode in placed.items():  # the same files, moved: not rewritten
        assert os.stat(folder / table / path).st_ino == inode
        assert not (lake.table_path(table) / path).exists()
    assert all(not (b.staging_dir).exists() and b.files == [] for b in staged.values())
    for batch in staged.values():  # what the run does after a failure: nothing left to drop
        discard_staged(batch)
    assert all((folder / table / path).exists() for table, path in placed)

    def no_spark() -> None:
        raise AssertionError("moved files are committed without Spark")

    versions = release_batch(lake, "b2", no_spark)  # type: ignore[arg-type]
    assert set(versions) == set(schemas.TABLES)
    for table in schemas.TABLES:
        assert read_table(spark, lake, table).count() == len(rows[table]), table
    assert list_quarantined(lake)[0].released
    assert all(not (folder / table).exists() for table in schemas.TABLES)
    assert release_batch(lake, "b2", no_spark) == {}  # type: ignore[arg-type]
