"""pipeline/validation/results.py: GX validation results reduced to what a reviewer reads.

The results are GX's own: a small suite run by GX's SQL engine on a DuckDB table (as the gate
runs it on DuckDB), in the result formats the gate asks for."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import duckdb
import great_expectations as gx
import pytest
from great_expectations.core import ExpectationSuiteValidationResult, ExpectationValidationResult
from great_expectations.expectations.expectation_configuration import ExpectationConfiguration
from great_expectations.validator.exception_info import ExceptionInfo
from pyspark.sql import Row  # plain Python: Spark's rows, as the Spark sampler gives them

from pipeline.validation import local_sql
from pipeline.validation.expectations import UnexpectedRowCountExpectation
from pipeline.validation.gx_context import run_definition
from pipeline.validation.results import ExpectationOutcome, outcomes_of
from pipeline.validation.suites import ROW_QUERY

NEGATIVE = "SELECT * FROM {batch} WHERE latency_ms < 0"
INDEXED = ["session_id", "frame_index", "latency_ms", "command", "payload", "ts"]
BETWEEN = "expect_column_values_to_be_between"
IN_SET = "expect_column_values_to_be_in_set"
NOT_NULL = "expect_column_values_to_not_be_null"


@pytest.fixture(scope="module")
def definition(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A validation definition over four acks: latency_ms -5 and -7 (frames 1 and 2), a FROB
    command (frame 3), and an expectation on a column the table lacks."""
    path = tmp_path_factory.mktemp("results") / "acks.duckdb"
    with duckdb.connect(str(path)) as db:
        db.execute(
            "CREATE TABLE acks (session_id VARCHAR, frame_index INTEGER, latency_ms DOUBLE, "
            "command VARCHAR, payload BLOB, ts TIMESTAMP)"
        )
        db.execute(
            "INSERT INTO acks VALUES "
            "('s1', 0, 1.0, 'ACK', 'abc', '2025-01-01 00:00:00'), "
            "('s1', 1, -5.0, 'ACK', 'abcd', '2025-01-01 00:00:01'), "
            "('s1', 2, -7.0, 'NACK', NULL, '2025-01-01 00:00:02'), "
            "('s2', 3, NULL, 'FROB', 'x', '2025-01-01 00:00:03')"
        )
    context = gx.get_context(mode="ephemeral")
    source = context.data_sources.add_sql(
        "acks_source", connection_string=local_sql.connection_string(path)
    )
    engine = source.get_execution_engine()
    local_sql.buffered_results(engine)
    batch = source.add_table_asset("acks", table_name="acks").add_batch_definition_whole_table(
        "whole"
    )
    expect = gx.expectations
    suite = context.suites.add(
        gx.ExpectationSuite(
            "acks",
            expectations=[
                expect.ExpectColumnValuesToNotBeNull(column="session_id"),
                expect.ExpectColumnValuesToBeBetween(column="latency_ms", min_value=0),
                expect.ExpectColumnValuesToBeInSet(
                    column="command", value_set=["ACK", "NACK"], description="ACK or NACK"
                ),
                expect.UnexpectedRowsExpectation(
                    unexpected_rows_query=NEGATIVE, description="no negative latency"
                ),
                UnexpectedRowCountExpectation(
                    unexpected_rows_query=NEGATIVE, description="no negative latency, counted"
                ),
                expect.ExpectColumnValuesToNotBeNull(column="no_such_column"),
            ],
        )
    )
    yield context.validation_definitions.add(
        gx.ValidationDefinition(name="acks", data=batch, suite=suite)
    )
    engine.engine.dispose()


@pytest.fixture(scope="module")
def summary(definition: Any) -> Any:
    """As the gate runs a failed suite again: SUMMARY, the rows' index columns named."""
    return run_definition(definition, None, INDEXED, "b1", detailed=True)


@pytest.fixture(scope="module")
def boolean_only(definition: Any) -> Any:
    """As the gate runs a suite first: success only."""
    return run_definition(definition, None, INDEXED, "b1", detailed=False)


def _find(
    outcomes: list[ExpectationOutcome], expectation: str, description: str | None = None
) -> Any:
    [found] = [
        o for o in outcomes if o.expectation == expectation and description in (None, o.description)
    ]
    return found


def test_a_passing_expectation_is_a_success_with_nothing_to_show(summary: Any) -> None:
    outcome = _find(outcomes_of("acks", summary, 5), NOT_NULL, "column=session_id")
    assert outcome == ExpectationOutcome(
        suite="acks",
        expectation=NOT_NULL,
        description="column=session_id",  # no description given: its arguments, no batch id
        success=True,
        unexpected_count=0,
    )


def test_a_failed_column_expectation_counts_and_names_its_rows(summary: Any) -> None:
    outcome = _find(outcomes_of("acks", summary, 5), BETWEEN)
    assert not outcome.success and outcome.error is None
    assert outcome.description == "column=latency_ms, min_value=0.0"
    assert outcome.unexpected_count == 2
    assert sorted(outcome.samples, key=lambda row: row["frame_index"]) == [
        {"session_id": "s1", "frame_index": 1, "latency_ms": -5.0},
        {"session_id": "s1", "frame_index": 2, "latency_ms": -7.0},
    ]
    in_set = _find(outcomes_of("acks", summary, 5), IN_SET)
    assert in_set.description == "ACK or NACK" and in_set.unexpected_count == 1
    assert in_set.samples == [{"session_id": "s2", "frame_index": 3, "command": "FROB"}]


def test_samples_are_cut_to_the_number_asked_for(summary: Any) -> None:
    outcome = _find(outcomes_of("acks", summary, 1), BETWEEN)
    assert outcome.unexpected_count == 2 and len(outcome.samples) == 1


def test_without_index_columns_the_samples_are_the_values(definition: Any) -> None:
    result = run_definition(definition, None, ["latency_ms", "command"], "b1", detailed=True)
    assert sorted(_find(outcomes_of("acks", result, 5), BETWEEN).samples) == [-7.0, -5.0]
    assert _find(outcomes_of("acks", result, 5), IN_SET).samples == ["FROB"]


def test_a_row_query_counts_its_rows_and_a_counted_one_reads_as_stored(summary: Any) -> None:
    outcomes = outcomes_of("acks", summary, 5)
    as_written = _find(outcomes, ROW_QUERY, "no negative latency")
    counted = _find(
        outcomes, ROW_QUERY, "no negative latency, counted"
    )  # the gate's type, shown as the suite's
    for outcome in (as_written, counted):
        assert not outcome.success and outcome.unexpected_count == 2
        assert outcome.samples == []  # SUMMARY names no row: the sampler fetches them


def test_the_rows_of_a_row_query_are_made_plain(definition: Any) -> None:
    result = definition.run(result_format={"result_format": "COMPLETE"})
    outcome = _find(outcomes_of("acks", result, 5), ROW_QUERY, "no negative latency")
    assert sorted(outcome.samples, key=lambda row: row["frame_index"]) == [
        {
            "session_id": "s1",
            "frame_index": 1,
            "latency_ms": -5.0,
            "command": "ACK",
            "payload": "<4 bytes>",
            "ts": str(datetime(2025, 1, 1, 0, 0, 1)),
        },
        {
            "session_id": "s1",
            "frame_index": 2,
            "latency_ms": -7.0,
            "command": "NACK",
            "payload": None,
            "ts": str(datetime(2025, 1, 1, 0, 0, 2)),
        },
    ]
    one = _find(outcomes_of("acks", result, 1), ROW_QUERY, "no negative latency")
    assert len(one.samples) == 1


def test_a_success_only_result_has_outcomes_with_no_count_or_samples(
    boolean_only: Any, summary: Any
) -> None:
    cheap, detailed = outcomes_of("acks", boolean_only, 5), outcomes_of("acks", summary, 5)
    assert [(o.expectation, o.description, o.success) for o in cheap] == [
        (o.expectation, o.description, o.success) for o in detailed
    ]
    for outcome in cheap:
        if outcome.success:
            continue
        assert outcome.unexpected_count is None and outcome.samples == [], outcome


class Sampler:
    """The rows of a failed expectation, as `SuiteEngine.failing_rows` gives them: Spark rows
    (bytes, nested rows, tuples, timestamps) that the report must hold as plain JSON."""

    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows
        self.calls: list[tuple[str, dict[str, Any], int]] = []

    def __call__(self, kind: str, kwargs: dict[str, Any], limit: int) -> list[Any]:
        self.calls.append((kind, kwargs, limit))
        return self.rows


SPARK_ROW = Row(
    session_id="s1",
    frame_index=1,
    body=b"\x00\x01\x02",
    headers={"id": "0", 7: "seven"},
    header_list=[("id", "0")],
    peer=Row(ip="10.0.0.1", port=61613),
    ts=datetime(2025, 1, 1, 0, 0, 1),
    latency_ms=-5.0,
    late=None,
)


def test_failed_expectations_take_whole_rows_from_the_sampler_made_plain(summary: Any) -> None:
    sampler = Sampler([SPARK_ROW])
    outcomes = outcomes_of("acks", summary, 3, sampler)
    calls = sampler.calls  # not the expectation that broke (a missing column): no rows to take
    assert sorted(kind for kind, _, _ in calls) == sorted([BETWEEN, IN_SET, ROW_QUERY, ROW_QUERY])
    between = next(kwargs for kind, kwargs, _ in calls if kind == BETWEEN)
    assert between["column"] == "latency_ms" and between["min_value"] == 0
    assert {limit for _, _, limit in calls} == {3}
    plain = {
        "session_id": "s1",
        "frame_index": 1,
        "body": "<3 bytes>",
        "headers": {"id": "0", "7": "seven"},
        "header_list": [["id", "0"]],
        "peer": {"ip": "10.0.0.1", "port": 61613},
        "ts": str(datetime(2025, 1, 1, 0, 0, 1)),
        "latency_ms": -5.0,
        "late": None,
    }
    for outcome in outcomes:
        if not outcome.success and "no_such_column" not in outcome.description:
            assert outcome.samples == [plain], outcome


def test_a_sampler_that_finds_no_row_leaves_gx_own_samples(summary: Any) -> None:
    outcome = _find(outcomes_of("acks", summary, 5, Sampler([])), IN_SET)
    assert outcome.samples == [{"session_id": "s2", "frame_index": 3, "command": "FROB"}]


def _broken(success: bool) -> Any:
    """A suite result whose one expectation GX could not evaluate as a whole (the form GX gives
    when the expectation itself raised)."""
    config = ExpectationConfiguration(type=NOT_NULL, kwargs={"column": "latency_ms"})
    info = ExceptionInfo(exception_traceback="Traceback ...", exception_message="it broke")
    result = ExpectationValidationResult(
        success=success, exception_info=info, expectation_config=config
    )
    return ExpectationSuiteValidationResult(success=False, results=[result], suite_name="acks")


@pytest.mark.parametrize("gx_success", [False, True])
def test_an_expectation_that_raised_fails_with_its_error_and_is_not_sampled(
    gx_success: bool,
) -> None:
    sampler = Sampler([SPARK_ROW])
    [outcome] = outcomes_of("acks", _broken(gx_success), 5, sampler)
    assert not outcome.success and outcome.error == "it broke"
    assert outcome.samples == [] and sampler.calls == []
    assert outcome.describe().endswith("[error: it broke]")


def test_an_expectation_whose_metric_raised_is_reported_with_its_error(summary: Any) -> None:
    sampler = Sampler([])
    outcome = _find(outcomes_of("acks", summary, 5, sampler), NOT_NULL, "column=no_such_column")
    assert not outcome.success
    assert outcome.error is not None and "no_such_column" in outcome.error
    assert all(kwargs.get("column") != "no_such_column" for _, kwargs, _ in sampler.calls)


@pytest.mark.parametrize(
    ("outcome", "text"),
    [
        (
            ExpectationOutcome("acks", NOT_NULL, "column=session_id", True),
            f"acks: {NOT_NULL} - column=session_id",
        ),
        (
            ExpectationOutcome("acks", BETWEEN, "latency", False, unexpected_count=0),
            f"acks: {BETWEEN} - latency (0 unexpected)",
        ),
        (
            ExpectationOutcome("frames", ROW_QUERY, "q", False, unexpected_count=3, error="x"),
            f"frames: {ROW_QUERY} - q (3 unexpected) [error: x]",
        ),
    ],
)
def test_an_outcome_describes_itself_on_one_line(outcome: ExpectationOutcome, text: str) -> None:
    assert outcome.describe() == text


def test_outcomes_keep_the_suite_name_given(summary: Any) -> None:
    assert {o.suite for o in outcomes_of("receipts", summary, 5)} == {"receipts"}
