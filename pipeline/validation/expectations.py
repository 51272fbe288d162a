"""The gate's runtime forms of GX's ``unexpected_rows_expectation`` (imports great_expectations).

GX resolves two metrics for each row query, the number of rows and the rows themselves, and so
runs two Spark jobs, though only ``result_format`` COMPLETE reports the rows. The gate never asks
for COMPLETE (it samples failing rows itself), so it runs the stored suites' row queries counted:

- :class:`UnexpectedRowCountExpectation`: the query as written, counted (one Spark job);
- :class:`UnexpectedFilterRowCountExpectation`: a query that only filters rows
  (``SELECT * FROM {batch} WHERE <condition>``) becomes a count of the rows the condition holds
  for, an aggregate GX computes in the one Spark job (or SQL query, on DuckDB:
  :mod:`pipeline.validation.local_sql`) it runs for the suite's other aggregates.

Both give the same outcome as the stored expectation. The suites in ``schemas/suites/`` stay
plain GX; :func:`load_counted_suite` gives a suite as the gate runs it (defined here, with the
types GX must know to load it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from great_expectations.core import ExpectationSuite
from great_expectations.core.metric_domain_types import MetricDomainTypes
from great_expectations.core.metric_function_types import MetricPartialFunctionTypes
from great_expectations.execution_engine import SparkDFExecutionEngine, SqlAlchemyExecutionEngine
from great_expectations.expectations.core.unexpected_rows_expectation import (
    UnexpectedRowsExpectation,
)
from great_expectations.expectations.metrics.metric_provider import metric_partial
from great_expectations.expectations.metrics.table_metric_provider import TableMetricProvider

from pipeline.validation.suites import counting_row_queries, row_filter, suite_json

ROW_COUNT = "unexpected_rows_query.row_count"
FILTER_COUNT = "unexpected_rows_query.filter_count"


class UnexpectedRowCountExpectation(UnexpectedRowsExpectation):
    """Fails when ``unexpected_rows_query`` returns rows; counts them, never fetches them."""

    metric_dependencies: ClassVar[tuple[str, ...]] = (ROW_COUNT,)  # the count, first

    def _validate(
        self,
        metrics: dict,
        runtime_configuration: dict | None = None,
        execution_engine: Any = None,
    ) -> Any:
        count = metrics[self.metric_dependencies[0]]
        counted = {**metrics, ROW_COUNT: count, "unexpected_rows_query.table": None}
        return super()._validate(counted, runtime_configuration, execution_engine)


class UnexpectedFilterRowCountExpectation(UnexpectedRowCountExpectation):
    """As :class:`UnexpectedRowCountExpectation`, for a query that only filters rows: the
    count is an aggregate over the batch, bundled with the suite's others."""

    metric_dependencies: ClassVar[tuple[str, ...]] = (FILTER_COUNT,)


class UnexpectedRowsFilterCount(TableMetricProvider):
    """Rows of the batch for which the condition of a filtering row query holds."""

    metric_name = FILTER_COUNT
    value_keys = ("unexpected_rows_query",)

    @metric_partial(
        engine=SparkDFExecutionEngine,
        partial_fn_type=MetricPartialFunctionTypes.AGGREGATE_FN,
        domain_type=MetricDomainTypes.TABLE,
    )
    def _spark(
        cls,
        execution_engine: SparkDFExecutionEngine,
        metric_domain_kwargs: dict,
        metric_value_kwargs: dict,
        metrics: dict[str, Any],
        runtime_configuration: dict,
    ) -> tuple[Any, dict, dict]:
        from pyspark.sql import functions as F

        condition = _condition(metric_value_kwargs)
        # WHERE keeps a row only when the condition is true (not false, not null): so does when
        return F.count(F.when(F.expr(condition), F.lit(1))), metric_domain_kwargs, {}

    @metric_partial(
        engine=SqlAlchemyExecutionEngine,
        partial_fn_type=MetricPartialFunctionTypes.AGGREGATE_FN,
        domain_type=MetricDomainTypes.TABLE,
    )
    def _sqlalchemy(
        cls,
        execution_engine: SqlAlchemyExecutionEngine,
        metric_domain_kwargs: dict,
        metric_value_kwargs: dict,
        metrics: dict[str, Any],
        runtime_configuration: dict,
    ) -> tuple[Any, dict, dict]:
        import sqlalchemy as sa

        condition = _condition(metric_value_kwargs)
        counted = sa.func.count(sa.case((sa.text(f"({condition})"), sa.literal(1))))
        return counted, metric_domain_kwargs, {}


def _condition(metric_value_kwargs: dict) -> str:
    condition = row_filter(metric_value_kwargs["unexpected_rows_query"])
    if condition is None:
        raise ValueError(
            "not a filtering row query: " + str(metric_value_kwargs["unexpected_rows_query"])
        )
    return condition


def load_counted_suite(
    name: str, foldable: Callable[[str], bool] = lambda _: True
) -> ExpectationSuite:
    """The suite as the gate runs it: its row queries counted
    (:func:`pipeline.validation.suites.counting_row_queries`, ``foldable`` as there), of this
    module's types."""
    return ExpectationSuite(**counting_row_queries(suite_json(name), foldable))
