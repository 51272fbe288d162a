"""Expectation suites, stored as JSON in ``schemas/suites/<name>.json`` beside the table schemas.

One suite per table plus two cross-table suites (``session_consistency``, ``batch_consistency``)
that run on the relations of the cross-table checks (:mod:`pipeline.validation.checks`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import schemas

if TYPE_CHECKING:
    from great_expectations.core import ExpectationSuite

CROSS_TABLE_SUITES: tuple[str, ...] = ("session_consistency", "batch_consistency")
SUITE_NAMES: tuple[str, ...] = (*schemas.TABLES, *CROSS_TABLE_SUITES)
SUITES_DIR_VARIABLE = "STOMP_LAKE_SUITES_DIR"
ROW_QUERY = "unexpected_rows_expectation"
COUNTED_ROW_QUERY = "unexpected_row_count_expectation"  # pipeline.validation.expectations
FILTER_ROW_QUERY = "unexpected_filter_row_count_expectation"  # pipeline.validation.expectations
_FILTER_QUERY = re.compile(
    r"\s*SELECT\s+\*\s+FROM\s+\{batch\}\s+WHERE\s+(?P<condition>.+?)\s*;?\s*", re.I | re.S
)
# Words that make a WHERE clause more than a test of one row: such queries run as they are.
_NOT_ROW_LOCAL = re.compile(
    r"\b(select|from|join|group|order|limit|having|union|over)\b|[{}]", re.I
)


def suite_json(name: str) -> dict[str, Any]:
    """The suite shipped in ``schemas/suites/``, or its replacement in the folder named by
    ``$STOMP_LAKE_SUITES_DIR`` when that folder has a file of the same name."""
    if name not in SUITE_NAMES:
        raise KeyError(f"no suite {name!r}; known: {', '.join(SUITE_NAMES)}")
    override = os.environ.get(SUITES_DIR_VARIABLE)
    if override and (Path(override) / f"{name}.json").is_file():
        return json.loads((Path(override) / f"{name}.json").read_text("utf-8"))
    text = resources.files(schemas).joinpath("suites", f"{name}.json").read_text("utf-8")
    return json.loads(text)


def load_suite(name: str) -> ExpectationSuite:
    """The suite as stored, as a GX object (imports great_expectations, which takes seconds).
    The gate runs it counted: `pipeline.validation.expectations.load_counted_suite`."""
    from great_expectations.core import ExpectationSuite

    return ExpectationSuite(**suite_json(name))


def counting_row_queries(
    suite: dict[str, Any], foldable: Callable[[str], bool] = lambda _: True
) -> dict[str, Any]:
    """The suite (as stored JSON) with its row queries counted, not fetched: a query that only
    filters rows (:func:`row_filter`) and whose condition ``foldable`` accepts becomes a count
    computed with the suite's other aggregates; any other query runs as it is, counted."""

    def as_run(expectation: dict[str, Any]) -> dict[str, Any]:
        if expectation.get("type") != ROW_QUERY:
            return expectation
        condition = _filter_of(expectation)
        kind = FILTER_ROW_QUERY if condition and foldable(condition) else COUNTED_ROW_QUERY
        return {**expectation, "type": kind}

    return {**suite, "expectations": [as_run(e) for e in suite.get("expectations", [])]}


def row_filter(query: object) -> str | None:
    """The condition of a query of the form ``SELECT * FROM {batch} WHERE <condition>`` when
    the condition tests each row on its own (no subquery, no template field), else None."""
    match = _FILTER_QUERY.fullmatch(query) if isinstance(query, str) else None
    if match is None or _NOT_ROW_LOCAL.search(match["condition"]):
        return None
    return match["condition"]


def row_filters(name: str) -> list[str]:
    """The conditions of the suite's row queries that only filter rows (:func:`row_filter`)."""
    expectations = suite_json(name).get("expectations", [])
    found = (_filter_of(e) for e in expectations if e.get("type") == ROW_QUERY)
    return [condition for condition in found if condition is not None]


def _filter_of(row_query: dict[str, Any]) -> str | None:
    return row_filter(row_query.get("kwargs", {}).get("unexpected_rows_query"))


def stored_type(kind: str) -> str:
    """The expectation type the suite stores for a type the gate ran."""
    return ROW_QUERY if kind in (COUNTED_ROW_QUERY, FILTER_ROW_QUERY) else kind


def columns_used(name: str, columns: list[str]) -> list[str]:
    """The columns (of ``columns``, in that order) that the suite's expectations name, in a
    column argument or inside an SQL query; validating reads only these."""
    expectations = suite_json(name).get("expectations", [])
    text = json.dumps([e.get("kwargs", {}) for e in expectations])
    return [c for c in columns if re.search(rf"(?<![\w.]){re.escape(c)}(?!\w)", text)]
