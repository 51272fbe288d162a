"""Expectation suites, stored as JSON in ``schemas/suites/<name>.json`` beside the table schemas.

One suite per table plus two cross-table suites (``session_consistency``, ``batch_consistency``)
that run on small check frames computed by :mod:`pipeline.validation.checks`.
"""

from __future__ import annotations

import json
import os
import re
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


def load_suite(name: str, *, counted: bool = False) -> ExpectationSuite:
    """The suite as a GX object (imports great_expectations, which takes seconds); ``counted``:
    as the gate runs it, row queries counted (:mod:`pipeline.validation.expectations`)."""
    from great_expectations.core import ExpectationSuite

    if not counted:
        return ExpectationSuite(**suite_json(name))
    import pipeline.validation.expectations  # noqa: F401  registers the counted type with GX

    return ExpectationSuite(**counting_row_queries(suite_json(name)))


def counting_row_queries(suite: dict[str, Any]) -> dict[str, Any]:
    """The suite (as stored JSON) with its row queries counted, not fetched."""
    expectations = [
        {**e, "type": COUNTED_ROW_QUERY} if e.get("type") == ROW_QUERY else e
        for e in suite.get("expectations", [])
    ]
    return {**suite, "expectations": expectations}


def stored_type(kind: str) -> str:
    """The expectation type the suite stores for a type the gate ran."""
    return ROW_QUERY if kind == COUNTED_ROW_QUERY else kind


def columns_used(name: str, columns: list[str]) -> list[str]:
    """The columns (of ``columns``, in that order) that the suite's expectations name, in a
    column argument or inside an SQL query; validating reads only these."""
    expectations = suite_json(name).get("expectations", [])
    text = json.dumps([e.get("kwargs", {}) for e in expectations])
    return [c for c in columns if re.search(rf"(?<![\w.]){re.escape(c)}(?!\w)", text)]
