"""Line editing for the `stomp-lake sql` prompt on a terminal (prompt-toolkit).

A statement is edited whole, over as many lines as it takes: Enter inserts a new line until the
text ends with `;` (or is a backslash command, or empty), then sends it. Tab completes table
names, column names (`table.` narrows them to that table's), SQL keywords and the backslash
commands; the history is kept in the same private file as before.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prompt_toolkit.completion import CompleteEvent, Completion
    from prompt_toolkit.document import Document

KEYWORDS = (
    "SELECT", "FROM", "WHERE", "GROUP BY", "ORDER BY", "HAVING", "LIMIT", "JOIN", "LEFT JOIN",
    "ON", "AS", "AND", "OR", "NOT", "NULL", "IS", "IN", "BETWEEN", "LIKE", "DISTINCT", "COUNT",
    "SUM", "AVG", "MIN", "MAX", "CASE", "WHEN", "THEN", "ELSE", "END", "WITH", "UNION", "DESC",
    "ASC", "percentile_approx", "date_trunc",
)  # fmt: skip
# A word after these names a table: only tables are offered there.
_TABLE_CONTEXT = re.compile(r"\b(FROM|JOIN|TABLE|INTO|DESCRIBE)\s+$", re.IGNORECASE)
COMMANDS = ("\\dt", "\\d", "\\audit", "\\format", "\\limit", "\\?", "\\q")


def statement_complete(text: str) -> bool:
    """Enter sends the text (rather than starting a new line) when this is true."""
    stripped = text.strip()
    return not stripped or stripped.startswith("\\") or stripped.endswith(";")


class SqlCompleter:
    """Tables, columns (all of them, or one table's after `table.`), keywords, commands."""

    def __init__(self, columns: Mapping[str, Iterable[str]]) -> None:
        self.columns = {table: sorted(set(names)) for table, names in columns.items()}
        self.all_columns = sorted({c for names in self.columns.values() for c in names})

    def candidates(self, word: str, line_start: str) -> list[str]:
        if line_start.startswith("\\"):
            if " " not in line_start.strip():
                return [c for c in COMMANDS if c.startswith(word)]
            return [t for t in sorted(self.columns) if t.startswith(word)]
        if "." in word:
            table, _, prefix = word.rpartition(".")
            return [f"{table}.{c}" for c in self.columns.get(table, ()) if c.startswith(prefix)]
        lower = word.lower()
        if _TABLE_CONTEXT.search(line_start[: len(line_start) - len(word)]):
            return [t for t in sorted(self.columns) if t.lower().startswith(lower)]
        words = [*sorted(self.columns), *self.all_columns, *KEYWORDS]
        return [w for w in dict.fromkeys(words) if w.lower().startswith(lower)]


def _completer(logic: SqlCompleter) -> object:
    from prompt_toolkit.completion import Completer, Completion

    class PromptCompleter(Completer):
        def get_completions(
            self, document: Document, complete_event: CompleteEvent
        ) -> Iterator[Completion]:
            word = document.get_word_before_cursor(WORD=True).lstrip("(,")
            if not word and not complete_event.completion_requested:
                return
            line = document.current_line_before_cursor.lstrip()
            for candidate in logic.candidates(word, line):
                yield Completion(candidate, start_position=-len(word))

    return PromptCompleter()


def terminal_reader(columns: Mapping[str, Iterable[str]], history: Path) -> Callable[[str], str]:
    """A `read(prompt)` for SqlPrompt: one whole statement per call, edited over many lines."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory
    from prompt_toolkit.key_binding import KeyBindings

    history.parent.mkdir(parents=True, exist_ok=True)
    history.touch(mode=0o600, exist_ok=True)
    os.chmod(history, 0o600)  # queries may name logins and destinations
    bindings = KeyBindings()
    logic = SqlCompleter(columns)

    @bindings.add("tab")
    def _tab(event: object) -> None:
        """One candidate: completed at once; several: the menu to choose from."""
        buffer = event.current_buffer  # type: ignore[attr-defined]
        document = buffer.document
        word = document.get_word_before_cursor(WORD=True).lstrip("(,")
        options = logic.candidates(word, document.current_line_before_cursor.lstrip())
        if len(options) == 1:
            buffer.delete_before_cursor(len(word))
            buffer.insert_text(options[0])
        elif options:
            buffer.start_completion(select_first=False)

    @bindings.add("enter")
    def _enter(event: object) -> None:
        buffer = event.current_buffer  # type: ignore[attr-defined]
        if statement_complete(buffer.text):
            buffer.validate_and_handle()
        else:
            buffer.insert_text("\n")

    session: PromptSession[str] = PromptSession(
        history=FileHistory(str(history)),
        completer=_completer(logic),  # type: ignore[arg-type]
        complete_while_typing=False,
        multiline=True,
        key_bindings=bindings,
        prompt_continuation=lambda width, _line, _soft: "...> ".rjust(width),
    )

    def read(prompt: str) -> str:
        return session.prompt(prompt)

    return read
