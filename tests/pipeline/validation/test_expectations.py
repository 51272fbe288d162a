from __future__ import annotations

import great_expectations as gx

from pipeline.validation.expectations import UnexpectedRowCountExpectation
from pipeline.validation.suites import COUNTED_ROW_QUERY, ROW_QUERY, load_suite, suite_json

QUERY = "SELECT * FROM {batch} WHERE latency_ms < 0"


def test_the_counted_type_is_registered_under_its_name() -> None:
    assert UnexpectedRowCountExpectation.expectation_type == COUNTED_ROW_QUERY
    dependencies = UnexpectedRowCountExpectation(
        unexpected_rows_query=QUERY
    ).get_validation_dependencies()
    assert dependencies.get_metric_names() == ["unexpected_rows_query.row_count"]


def test_counted_row_query_gives_the_outcome_of_gx_own(spark) -> None:
    frame = spark.createDataFrame([(1.5,), (-2.0,), (-3.0,)], "latency_ms double")
    context = gx.get_context(mode="ephemeral")
    batch = (
        context.data_sources.add_spark("acks")
        .add_dataframe_asset("acks")
        .add_batch_definition_whole_dataframe("whole")
        .get_batch(batch_parameters={"dataframe": frame})
    )
    for kind in (gx.expectations.UnexpectedRowsExpectation, UnexpectedRowCountExpectation):
        failed = batch.validate(kind(unexpected_rows_query=QUERY), result_format="SUMMARY")
        assert not failed.success and failed.result["observed_value"] == 2
        positive = batch.validate(kind(unexpected_rows_query=QUERY.replace("<", ">")))
        assert not positive.success  # 1.5 > 0
        clean = batch.validate(kind(unexpected_rows_query=QUERY.replace("< 0", "< -10")))
        assert clean.success


def test_the_gate_runs_every_row_query_counted() -> None:
    stored = [e["type"] for e in suite_json("frames")["expectations"]]
    counted = [e.expectation_type for e in load_suite("frames", counted=True).expectations]
    assert ROW_QUERY in stored and ROW_QUERY not in counted
    assert counted == [COUNTED_ROW_QUERY if kind == ROW_QUERY else kind for kind in stored]
