"""The gate's runtime form of GX's ``unexpected_rows_expectation`` (imports great_expectations).

GX resolves two metrics for each row query, the number of rows and the rows themselves, and so
runs two Spark jobs, though only ``result_format`` COMPLETE reports the rows. The gate never asks
for COMPLETE (it samples failing rows itself), so it runs the stored suites' row queries as
:class:`UnexpectedRowCountExpectation`: the same query and outcome, one job. The suites in
``schemas/suites/`` stay plain GX.
"""

from __future__ import annotations

from typing import Any, ClassVar

from great_expectations.expectations.core.unexpected_rows_expectation import (
    UnexpectedRowsExpectation,
)


class UnexpectedRowCountExpectation(UnexpectedRowsExpectation):
    """Fails when ``unexpected_rows_query`` returns rows; counts them, never fetches them."""

    metric_dependencies: ClassVar[tuple[str, ...]] = ("unexpected_rows_query.row_count",)

    def _validate(
        self,
        metrics: dict,
        runtime_configuration: dict | None = None,
        execution_engine: Any = None,
    ) -> Any:
        counted = {**metrics, "unexpected_rows_query.table": None}
        return super()._validate(counted, runtime_configuration, execution_engine)
