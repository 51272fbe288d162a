"""The terminal prompt's completion and when Enter sends a statement (no terminal needed)."""

from __future__ import annotations

from pipeline.audit.line_editor import SqlCompleter, statement_complete

COLUMNS = {"sessions": ["session_id", "login", "client_port"], "frames": ["session_id", "command"]}


def test_enter_sends_a_statement_only_once_it_ends_with_a_semicolon() -> None:
    assert not statement_complete("SELECT *\nFROM sessions")
    assert statement_complete("SELECT *\nFROM sessions;\n")
    assert statement_complete("\\d sessions") and statement_complete("  ")


def test_tables_columns_keywords_and_commands_complete() -> None:
    completer = SqlCompleter(COLUMNS)
    assert completer.candidates("sess", "SELECT sess") == ["sessions", "session_id"]
    assert completer.candidates("sess", "SELECT * FROM sess") == ["sessions"]  # tables only
    assert completer.candidates("lo", "SELECT lo") == ["login"]
    assert completer.candidates("frames.", "SELECT frames.") == [
        "frames.command",
        "frames.session_id",
    ]
    assert completer.candidates("sel", "sel") == ["SELECT"]
    assert completer.candidates("\\d", "\\d") == ["\\dt", "\\d"]
    assert completer.candidates("fr", "\\d fr") == ["frames"]
