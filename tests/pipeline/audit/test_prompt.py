"""The interactive SQL prompt, driven by scripted lines over the sample lake."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable

import pytest

from pipeline.audit.prompt import SqlPrompt
from pipeline.audit.views import register_views
from tests.pipeline.audit.sample_lake import connections, shared_sample_lake

pytestmark = pytest.mark.spark


def _lines(lines: Iterable[str | BaseException]) -> Callable[[str], str]:
    """A stand-in for input(): the lines, then end of input (Ctrl-D)."""
    pending = iter(lines)

    def read(prompt: str) -> str:
        item = next(pending, EOFError())
        if isinstance(item, BaseException):
            raise item
        return item

    return read


@pytest.fixture(scope="module")
def session(spark, tmp_path_factory):
    session = spark.newSession()
    tables = register_views(session, shared_sample_lake(tmp_path_factory))
    return session, tables


def _run(session, lines: list[str | BaseException]) -> str:
    spark, tables = session
    out = io.StringIO()
    assert SqlPrompt(spark, tables, out, read=_lines(lines)).loop() == 0
    return out.getvalue()


def test_a_statement_may_span_lines_and_several_may_share_one(session) -> None:
    text = _run(
        session,
        [
            "SELECT login, count(*) AS n",
            "FROM sessions GROUP BY login ORDER BY login;",
            "SELECT 1 AS one; SELECT 2 AS two;",
        ],
    )
    expected: dict[str, int] = {}
    for conn in connections():
        expected[conn["login"]] = expected.get(conn["login"], 0) + 1
    assert f"admin | {expected['admin']}\n" in text
    assert "one" in text and "two" in text
    assert text.count("(1 row)") == 2


def test_errors_are_reported_and_the_prompt_goes_on(session) -> None:
    text = _run(session, ["SELECT * FROM no_such_table;", "SELEC 1;", "SELECT 3 AS x;"])
    assert text.count("error: ") == 2
    assert "TABLE_OR_VIEW_NOT_FOUND" in text
    assert text.rstrip().endswith("(1 row)")


def test_backslash_commands(session) -> None:
    text = _run(
        session,
        [
            "\\?",
            "\\dt",
            "\\d heartbeats",
            "\\d nothing",
            "\\format csv",
            "SELECT 7 AS seven;",
            "\\format json",
            "\\limit 1",
            "SELECT * FROM VALUES (1), (2) AS t(v);",
            "\\audit",
            "\\audit no_such_audit",
            "\\bogus",
            "\\q",
            "SELECT 'never run';",
        ],
    )
    assert "\\audit NAME" in text  # the help
    assert "Heart-beat EOLs" in text  # \dt shows the tables' descriptions
    assert "late_1_5x" in text and "gap_ms - expected_ms" in text  # \d shows the columns
    assert "no table 'nothing'" in text
    assert "seven\n7\n" in text
    assert '[\n{"v":1}\n]' in text
    assert "end_to_end_latency" in text
    assert "no audit query named 'no_such_audit'" in text
    assert "unknown or incomplete command" in text
    assert "never run" not in text


def test_a_saved_audit_runs_from_the_prompt(session) -> None:
    text = _run(session, ["\\audit failed_logins"])
    refused = sum(1 for c in connections() if not c["connected"])
    assert f"({refused} rows)" in text


def test_ctrl_c_drops_the_statement_being_typed(session) -> None:
    text = _run(session, ["SELECT 'dropped' AS x", KeyboardInterrupt(), "SELECT 'kept' AS y;"])
    assert "dropped" not in text
    assert "kept" in text


def test_a_refused_statement_is_a_message_and_the_prompt_goes_on(session) -> None:
    out = _run(session, ["ADD JAR /tmp/evil.jar;", "SELECT 1 AS one;"])
    assert "refused: ADD JAR is refused: read-only; --allow-write lifts this\n" in out
    assert "(1 row)" in out
