"""Splitting SQL text into statements at top-level semicolons (not inside quotes or comments)."""

from __future__ import annotations

_QUOTES = "'\"`"


def split_statements(text: str) -> tuple[list[str], str]:
    """(complete statements without their `;`, the unfinished rest). Empty statements and
    statements made only of comments are dropped."""
    statements: list[str] = []
    start = 0
    i = 0
    quote = ""
    while i < len(text):
        char = text[i]
        if quote:
            if char == "\\" and quote != "`":
                i += 2
                continue
            if char == quote:
                quote = ""
        elif char in _QUOTES:
            quote = char
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = len(text) if end < 0 else end + 2
            continue
        elif char == ";":
            statement = text[start:i].strip()
            if has_code(statement):
                statements.append(statement)
            start = i + 1
        i += 1
    return statements, text[start:]


def has_code(text: str) -> bool:
    """False for text made only of whitespace and comments."""
    i = 0
    while i < len(text):
        if text[i].isspace():
            i += 1
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = len(text) if end < 0 else end + 2
        else:
            return True
    return False


def all_statements(text: str) -> list[str]:
    """Every statement of `text`; the last one needs no `;`."""
    statements, rest = split_statements(text)
    if has_code(rest):
        statements.append(rest.strip())
    return statements
