"""Sample rows that break a column expectation, fetched again from the batch for the report.

GX's SUMMARY result names the unexpected values; a reviewer needs the whole rows. The filters
below mirror the column expectations the suites use; SQL checks are run again with a limit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def unexpected_filter(kind: str, kwargs: dict[str, Any]) -> Column | None:
    from pyspark.sql import functions as F

    column = cast(str, kwargs.get("column"))  # set for every column expectation tested below
    if kind == "expect_column_values_to_not_be_null":
        condition = F.col(column).isNull()
    elif kind == "expect_column_values_to_be_in_set":
        condition = F.col(column).isNotNull() & ~F.col(column).isin(list(kwargs["value_set"]))
    elif kind == "expect_column_values_to_be_between":
        value = F.col(column)
        low, high = kwargs.get("min_value"), kwargs.get("max_value")
        condition = F.lit(False)
        if low is not None:
            condition = condition | (value < low)
        if high is not None:
            condition = condition | (value > high)
    elif kind == "expect_column_pair_values_to_be_equal":
        a, b = F.col(kwargs["column_A"]), F.col(kwargs["column_B"])
        condition = a.isNotNull() & b.isNotNull() & (a != b)
    else:
        return None
    row_condition = kwargs.get("row_condition")
    if isinstance(row_condition, dict):
        row_condition = row_condition.get("pass_through_filter")
    if isinstance(row_condition, str) and row_condition:
        condition = condition & _row_condition(row_condition, kwargs.get("condition_parser"))
    return condition


def _row_condition(text: str, parser: object) -> Column:
    """A suite's row condition as a Spark column: GX's own syntax (``col("x")>=20``, which
    both of GX's engines the gate uses take), or Spark SQL (``condition_parser`` "spark")."""
    from pyspark.sql import functions as F

    if parser == "spark":
        return F.expr(text)
    from great_expectations.expectations.legacy_row_conditions import parse_condition_to_spark

    return parse_condition_to_spark(text)


def sample_rows(frame: DataFrame, kind: str, kwargs: dict[str, Any], limit: int) -> list[Any]:
    if kind == "unexpected_rows_expectation":
        view = "_validation_sample"
        frame.createOrReplaceTempView(view)
        query = kwargs["unexpected_rows_query"].replace("{batch}", view)
        rows = frame.sparkSession.sql(query).limit(limit).collect()
        return [row.asDict(recursive=True) for row in rows]
    condition = unexpected_filter(kind, kwargs)
    if condition is None:
        return []
    return [row.asDict(recursive=True) for row in frame.where(condition).limit(limit).collect()]
