"""Splitting SQL text at top-level semicolons."""

from __future__ import annotations

from pipeline.audit.statements import all_statements, has_code, split_statements


def test_statements_end_at_semicolons_outside_quotes_and_comments() -> None:
    text = (
        "SELECT ';' AS a, \"x;y\" AS `b;c`; -- a comment; still a comment\n"
        "SELECT 'it\\'s; fine' /* block; comment */ FROM t;\n"
        "SELECT 3"
    )
    statements, rest = split_statements(text)
    assert statements == [
        "SELECT ';' AS a, \"x;y\" AS `b;c`",
        "-- a comment; still a comment\nSELECT 'it\\'s; fine' /* block; comment */ FROM t",
    ]
    assert rest.strip() == "SELECT 3"
    assert all_statements(text)[-1] == "SELECT 3"


def test_empty_and_comment_only_statements_are_dropped() -> None:
    assert split_statements(";;  ; -- nothing\n;") == ([], "")
    assert all_statements("-- just a comment") == []
    assert all_statements("/* unterminated") == []
    assert not has_code("  -- a\n /* b */ ")
    assert has_code("-- a\nSELECT 1")


def test_an_unfinished_statement_is_kept_for_the_next_line() -> None:
    statements, rest = split_statements("SELECT 'open;\n")
    assert statements == []
    assert rest == "SELECT 'open;\n"
    statements, rest = split_statements(rest + "still open';\n")
    assert statements == ["SELECT 'open;\nstill open'"]
    assert rest == "\n"
