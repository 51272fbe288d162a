"""pipeline/validation/samples.py: the whole rows shown for a failed expectation.

The filters themselves are Spark columns (``F.col`` needs a running SparkContext), so what is
tested here without Spark is the part that needs none: the kinds the module has no filter for,
which must leave the batch unread, and the contract between the filters and the shipped suites
(every kind, bound, pair rule and row-condition syntax the suites use is one a filter mirrors).
The filters' rows on a real frame are exercised through the gate in test_gate.py (Spark)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import pytest

from pipeline.validation.samples import sample_rows, unexpected_filter
from pipeline.validation.suites import COUNTED_ROW_QUERY, ROW_QUERY, SUITE_NAMES, suite_json

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# The column expectations `unexpected_filter` mirrors as a Spark filter.
MIRRORED = {
    "expect_column_values_to_not_be_null",
    "expect_column_values_to_be_in_set",
    "expect_column_values_to_be_between",
    "expect_column_pair_values_to_be_equal",
}
# What `_row_condition` reads: GX's own syntax (``col("x")>=20``) or Spark SQL.
ROW_CONDITION_PARSERS = {"great_expectations", "spark"}


class UnreadFrame:
    """Stands for a batch's frame that must not be read: any use of it fails the test."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the frame was used: .{name}")


def _suite_expectations() -> list[tuple[str, dict[str, Any]]]:
    return [
        (e["type"], e.get("kwargs", {}))
        for name in SUITE_NAMES
        for e in suite_json(name)["expectations"]
    ]


NOT_MIRRORED = [
    ("expect_column_values_to_be_unique", {"column": "message_id"}),
    ("expect_column_values_to_match_regex", {"column": "command", "regex": "^[A-Z]+$"}),
    ("expect_table_row_count_to_be_between", {"min_value": 1}),
    ("expect_column_mean_to_be_between", {"column": "latency_ms", "min_value": 0}),
    (ROW_QUERY, {"unexpected_rows_query": "SELECT * FROM {batch} WHERE a < 0"}),
    (COUNTED_ROW_QUERY, {"unexpected_rows_query": "SELECT * FROM {batch} WHERE a < 0"}),
]


@pytest.mark.parametrize(("kind", "kwargs"), NOT_MIRRORED)
def test_a_kind_with_no_mirror_has_no_filter(kind: str, kwargs: dict[str, Any]) -> None:
    assert unexpected_filter(kind, kwargs) is None


@pytest.mark.parametrize(("kind", "kwargs"), [k for k in NOT_MIRRORED if k[0] != ROW_QUERY])
def test_a_kind_with_no_filter_samples_nothing_and_leaves_the_frame_unread(
    kind: str, kwargs: dict[str, Any]
) -> None:
    """The report then keeps GX's own sample values (pipeline.validation.results)."""
    frame = cast("DataFrame", UnreadFrame())
    assert sample_rows(frame, kind, kwargs, 5) == []


def test_every_column_expectation_the_suites_use_has_a_filter() -> None:
    kinds = {kind for kind, _ in _suite_expectations()}
    assert kinds - {ROW_QUERY} <= MIRRORED, kinds - {ROW_QUERY} - MIRRORED


def test_the_suites_bounds_are_inclusive_as_the_between_filter_takes_them() -> None:
    between = [k for kind, k in _suite_expectations() if kind.endswith("_to_be_between")]
    assert between
    for kwargs in between:
        assert not kwargs.get("strict_min") and not kwargs.get("strict_max"), kwargs


def test_the_suites_pair_checks_skip_rows_missing_a_value_as_the_pair_filter_does() -> None:
    pairs = [k for kind, k in _suite_expectations() if kind.startswith("expect_column_pair")]
    assert pairs
    assert {k.get("ignore_row_if") for k in pairs} == {"either_value_is_missing"}


def test_the_suites_row_conditions_are_in_a_syntax_the_filters_read() -> None:
    conditioned = [k for _, k in _suite_expectations() if k.get("row_condition")]
    assert conditioned
    for kwargs in conditioned:
        assert kwargs.get("condition_parser") in ROW_CONDITION_PARSERS, kwargs
