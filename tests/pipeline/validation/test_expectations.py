from __future__ import annotations

import great_expectations as gx
import pytest

from pipeline.validation.expectations import (
    UnexpectedFilterRowCountExpectation,
    UnexpectedRowCountExpectation,
    load_counted_suite,
)
from pipeline.validation.suites import (
    COUNTED_ROW_QUERY,
    FILTER_ROW_QUERY,
    ROW_QUERY,
    row_filter,
    suite_json,
)

QUERY = "SELECT * FROM {batch} WHERE latency_ms < 0"
GX_OWN = gx.expectations.UnexpectedRowsExpectation
RUNTIME_KINDS = (UnexpectedRowCountExpectation, UnexpectedFilterRowCountExpectation)


def _acks(spark):
    """A GX batch of acks, its metrics not yet computed; latency_ms: one positive, two
    negative, one null."""
    frame = spark.createDataFrame([(1.5,), (-2.0,), (-3.0,), (None,)], "latency_ms double")
    context = gx.get_context(mode="ephemeral")
    return (
        context.data_sources.add_spark("acks")
        .add_dataframe_asset("acks")
        .add_batch_definition_whole_dataframe("whole")
        .get_batch(batch_parameters={"dataframe": frame})
    )


@pytest.fixture
def acks_batch(spark):
    return _acks(spark)


def test_the_gate_types_are_registered_under_their_names() -> None:
    assert UnexpectedRowCountExpectation.expectation_type == COUNTED_ROW_QUERY
    assert UnexpectedFilterRowCountExpectation.expectation_type == FILTER_ROW_QUERY
    for kind, metric in zip(RUNTIME_KINDS, ("row_count", "filter_count"), strict=True):
        dependencies = kind(unexpected_rows_query=QUERY).get_validation_dependencies()
        assert dependencies.get_metric_names() == [f"unexpected_rows_query.{metric}"]


@pytest.mark.parametrize(
    ("condition", "unexpected"),
    [
        ("latency_ms < 0", 2),
        ("latency_ms > 0", 1),
        ("latency_ms < -10", 0),
        ("latency_ms IS NULL", 1),
    ],
)
def test_the_gate_types_give_the_outcome_of_gx_own(acks_batch, condition, unexpected) -> None:
    query = f"SELECT * FROM {{batch}} WHERE {condition}"
    for kind in (GX_OWN, *RUNTIME_KINDS):
        result = acks_batch.validate(kind(unexpected_rows_query=query), result_format="SUMMARY")
        assert result.success is (unexpected == 0), kind
        assert result.result["observed_value"] == unexpected, kind


def _spark_jobs(spark, expectations: list, group: str) -> tuple[list[bool], int]:
    """Each expectation's success, and the Spark jobs GX ran to validate them as one suite on a
    batch of its own (GX keeps a batch's metrics)."""
    batch = _acks(spark)
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup(group, group)
    try:
        result = batch.validate(gx.ExpectationSuite(group, expectations=expectations))
    finally:
        spark.sparkContext.setJobGroup(None, None)
    return [r.success for r in result.results], len(tracker.getJobIdsForGroup(group))


def test_filter_counts_are_computed_with_the_suites_other_aggregates(spark) -> None:
    between = gx.expectations.ExpectColumnValuesToBeBetween(column="latency_ms", min_value=0)
    filters = [
        UnexpectedFilterRowCountExpectation(unexpected_rows_query=QUERY),
        UnexpectedFilterRowCountExpectation(unexpected_rows_query=QUERY.replace("<", ">")),
    ]
    counted = [UnexpectedRowCountExpectation(unexpected_rows_query=QUERY)] * 2
    alone, alone_jobs = _spark_jobs(spark, [between], "between-alone")
    folded, folded_jobs = _spark_jobs(spark, [*filters, between], "with-filters")
    _, counted_jobs = _spark_jobs(spark, [*counted, between], "with-queries")
    assert alone == [False] and folded == [False, False, False]
    assert folded_jobs == alone_jobs  # the two filter counts ride on the aggregates' jobs
    assert counted_jobs >= alone_jobs + 2  # a query that is run costs a job of its own


def test_the_gate_folds_the_shipped_filters_and_counts_the_rest() -> None:
    stored = suite_json("frames")["expectations"]
    run = [e.expectation_type for e in load_counted_suite("frames").expectations]
    assert ROW_QUERY not in run and FILTER_ROW_QUERY in run and COUNTED_ROW_QUERY in run
    for expectation, kind in zip(stored, run, strict=True):
        if expectation["type"] != ROW_QUERY:
            assert kind == expectation["type"]
        elif row_filter(expectation["kwargs"]["unexpected_rows_query"]):
            assert kind == FILTER_ROW_QUERY
        else:
            assert kind == COUNTED_ROW_QUERY


def test_suites_import_no_expectation_type() -> None:
    """suites.py is read without GX's runtime types; the counted suites live with them."""
    import ast
    from pathlib import Path

    import pipeline.validation.suites as suites

    tree = ast.parse(Path(suites.__file__).read_text())
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert "pipeline.validation.expectations" not in imported
