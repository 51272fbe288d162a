from __future__ import annotations

import json
from typing import Any

import pytest

import schemas
from pipeline.validation.suites import (
    COUNTED_ROW_QUERY,
    CROSS_TABLE_SUITES,
    FILTER_ROW_QUERY,
    ROW_QUERY,
    SUITE_NAMES,
    SUITES_DIR_VARIABLE,
    columns_used,
    counting_row_queries,
    load_suite,
    row_filter,
    row_filters,
    stored_type,
    suite_json,
)

CROSS_TABLE_COLUMNS = {
    "session_consistency": {
        "session_id",
        "known_session",
        "frames_in_batch",
        "frames_counted",
        "heartbeats_off_interval",
        "rows_outside_session",
        "rows_after_capture",
    },
    "batch_consistency": {"table", "table_rows", "run_counter", "acks_total", "resolved_share"},
}


def _columns(suite: str) -> set[str]:
    if suite in CROSS_TABLE_SUITES:
        return CROSS_TABLE_COLUMNS[suite]
    return set(schemas.load(suite).column_names)


@pytest.mark.parametrize("name", SUITE_NAMES)
def test_every_suite_names_only_real_columns(name: str) -> None:
    raw = suite_json(name)
    assert raw["name"] == name and raw["expectations"]
    columns = _columns(name)
    for expectation in raw["expectations"]:
        kwargs = expectation["kwargs"]
        for key in ("column", "column_A", "column_B"):
            if key in kwargs:
                assert kwargs[key] in columns, (name, expectation)
        if expectation["type"] == "unexpected_rows_expectation":
            assert "{batch}" in kwargs["unexpected_rows_query"]
            assert expectation.get("description"), "a SQL check needs a description"


def test_suites_round_trip_through_gx() -> None:
    for name in SUITE_NAMES:
        suite = load_suite(name)
        assert suite.name == name
        assert len(suite.expectations) == len(suite_json(name)["expectations"])


def test_every_table_has_a_suite() -> None:
    assert set(schemas.TABLES) <= set(SUITE_NAMES)
    with pytest.raises(KeyError):
        suite_json("nope")


def test_a_suite_in_the_override_folder_replaces_the_shipped_one(tmp_path, monkeypatch) -> None:
    stricter = {"name": "sessions", "expectations": []}
    (tmp_path / "sessions.json").write_text(json.dumps(stricter))
    monkeypatch.setenv(SUITES_DIR_VARIABLE, str(tmp_path))
    assert suite_json("sessions") == stricter
    assert suite_json("frames")["expectations"]  # no file there: the shipped suite


def test_a_suite_reads_the_columns_it_names_and_no_others() -> None:
    columns = list(schemas.load("frames").column_names)
    used = columns_used("frames", columns)
    assert {"session_id", "command", "content_length", "ts_end_ns"} <= set(used)  # SQL ones too
    assert not {"headers", "header_list", "body", "body_sha256"} & set(used)
    assert used == [c for c in columns if c in used]


@pytest.mark.parametrize(
    ("query", "condition"),
    [
        ("SELECT * FROM {batch} WHERE latency_ms < 0", "latency_ms < 0"),
        ("select *\n  from {batch}\n where a <> b ;", "a <> b"),
        ("SELECT * FROM {batch} WHERE x NOT IN ('ACK', 'NACK')", "x NOT IN ('ACK', 'NACK')"),
        ("SELECT session_id FROM {batch} WHERE a < 0", None),
        ("SELECT * FROM {batch} WHERE TRUE GROUP BY a HAVING count(*) > 1", None),
        ("SELECT * FROM {batch} WHERE a IN (SELECT b FROM other)", None),
        ("SELECT * FROM {batch} WHERE a < {limit}", None),
        ("SELECT * FROM {batch} WHERE a < 0 ORDER BY a", None),
        ("SELECT * FROM {batch} b JOIN other o ON b.a = o.a WHERE b.a < 0", None),
        (None, None),
    ],
)
def test_row_filter_takes_only_queries_that_test_each_row_alone(query, condition) -> None:
    assert row_filter(query) == condition


def test_filtering_row_queries_are_folded_and_the_others_counted() -> None:
    suite: dict[str, Any] = {
        "name": "t",
        "expectations": [
            {
                "type": ROW_QUERY,
                "kwargs": {"unexpected_rows_query": "SELECT * FROM {batch} WHERE a < 0"},
            },
            {
                "type": ROW_QUERY,
                "kwargs": {"unexpected_rows_query": "SELECT * FROM {batch} WHERE b < 0"},
            },
            {
                "type": ROW_QUERY,
                "kwargs": {
                    "unexpected_rows_query": "SELECT a FROM {batch} WHERE TRUE GROUP BY a"
                    " HAVING count(*) > 1"
                },
            },
            {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "a"}},
        ],
    }
    run = counting_row_queries(suite, foldable=lambda condition: condition != "b < 0")
    kinds = [e["type"] for e in run["expectations"]]
    assert kinds == [
        FILTER_ROW_QUERY,
        COUNTED_ROW_QUERY,  # not foldable: runs as its own query
        COUNTED_ROW_QUERY,
        "expect_column_values_to_not_be_null",
    ]
    assert [stored_type(k) for k in kinds] == [ROW_QUERY, ROW_QUERY, ROW_QUERY, kinds[3]]
    assert [e["kwargs"] for e in run["expectations"]] == [
        e["kwargs"] for e in suite["expectations"]
    ]


@pytest.mark.parametrize("name", SUITE_NAMES)
def test_row_filters_are_the_conditions_a_suite_may_fold(name: str) -> None:
    suite = suite_json(name)
    run = counting_row_queries(suite)  # every condition foldable
    folded = [
        row_filter(original["kwargs"]["unexpected_rows_query"])
        for original, ran in zip(suite["expectations"], run["expectations"], strict=True)
        if ran["type"] == FILTER_ROW_QUERY
    ]
    assert row_filters(name) == folded
    assert counting_row_queries(suite, set(folded).__contains__) == run
