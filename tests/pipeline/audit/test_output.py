"""Query results as a table, CSV and JSON: values turned to text by Spark, times in UTC."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime

import pytest

from pipeline.audit.output import error_summary, format_table, write_result

ROWS = [
    (1, "a\nb", datetime(2026, 11, 22, 2, 36, 14, 519152, tzinfo=UTC), {"x-seq": "0"}, 1.5),
    (22, None, None, {}, None),
    (333, "x" * 80, datetime(2026, 1, 1, tzinfo=UTC), {"k": "v"}, 0.25),
]
SCHEMA = "n int, text string, at timestamp, headers map<string,string>, ratio double"


@pytest.fixture(scope="module")
def frame(spark):
    return spark.createDataFrame(ROWS, SCHEMA).orderBy("n")


def test_an_aligned_table_right_aligns_numbers_and_shows_nulls() -> None:
    text = format_table(["n", "name"], [["1", "ab"], ["100", None]], [True, False])
    assert text.splitlines() == ["n   | name", "----+-----", "  1 | ab", "100 | NULL"]


@pytest.mark.spark
def test_table_output_escapes_newlines_clips_long_values_and_counts_rows(frame) -> None:
    out = io.StringIO()
    assert write_result(frame, out, "table") == 3
    lines = out.getvalue().splitlines()
    assert lines[0].split(" | ")[0].strip() == "n"
    assert "a\\nb" in lines[2]
    assert "2026-11-22T02:36:14.519152Z" in lines[2]
    assert '{"x-seq":"0"}' in lines[2]
    assert "x" * 59 + "…" in lines[4]
    assert lines[-1] == "(3 rows)"


@pytest.mark.spark
def test_table_output_says_when_rows_were_left_out(frame) -> None:
    out = io.StringIO()
    assert write_result(frame, out, "table", limit=2) == 2
    assert out.getvalue().splitlines()[-1].startswith("(2 rows; only the first 2 shown")


@pytest.mark.spark
def test_csv_output(frame) -> None:
    out = io.StringIO()
    write_result(frame, out, "csv")
    rows = list(csv.reader(io.StringIO(out.getvalue())))
    assert rows[0] == ["n", "text", "at", "headers", "ratio"]
    assert rows[1] == ["1", "a\nb", "2026-11-22T02:36:14.519152Z", '{"x-seq":"0"}', "1.5"]
    assert rows[2] == ["22", "", "", "{}", ""]
    assert len(rows) == 4


@pytest.mark.spark
def test_json_output_is_an_array_of_objects_with_nulls(frame) -> None:
    out = io.StringIO()
    write_result(frame, out, "json", limit=2)
    objects = json.loads(out.getvalue())
    assert objects[0] == {
        "n": 1,
        "text": "a\nb",
        "at": "2026-11-22T02:36:14.519152Z",
        "headers": {"x-seq": "0"},
        "ratio": 1.5,
    }
    assert objects[1] == {"n": 22, "text": None, "at": None, "headers": {}, "ratio": None}
    assert len(objects) == 2


@pytest.mark.spark
def test_an_empty_result_is_valid_in_every_format(spark) -> None:
    empty = spark.createDataFrame([], SCHEMA)
    for fmt, expected in (("json", "[]\n"), ("csv", "n,text,at,headers,ratio\n")):
        out = io.StringIO()
        assert write_result(empty, out, fmt) == 0
        assert out.getvalue() == expected
    out = io.StringIO()
    write_result(empty, out, "table")
    assert out.getvalue().endswith("(0 rows)\n")


def test_unknown_formats_and_long_errors() -> None:
    with pytest.raises(ValueError, match="table, csv, json"):
        write_result(None, io.StringIO(), "xml")  # type: ignore[arg-type]
    assert error_summary(ValueError("one\n\ntwo\nthree")) == "one"
    assert error_summary(ValueError("one\ntwo"), verbose=True) == "one\ntwo"
    assert error_summary(KeyError()) == "KeyError"


def test_a_spark_error_is_one_line_with_its_class_and_position(spark) -> None:
    query = "SELECT id,\n       nope\nFROM range(3)"
    with pytest.raises(Exception) as failure:  # noqa: PT011 - Spark's AnalysisException
        spark.sql(query).collect()
    assert error_summary(failure.value, query) == (
        "UNRESOLVED_COLUMN.WITH_SUGGESTION: A column, variable, or function parameter with name "
        "`nope` cannot be resolved. Did you mean one of the following? [`id`]. "
        "(line 2, column 8: nope)"
    )
    assert "Project" in error_summary(failure.value, query, verbose=True)  # the plan
