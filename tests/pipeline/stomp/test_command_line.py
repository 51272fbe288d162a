"""Command line decoding."""

from __future__ import annotations

import pytest

from pipeline.stomp.command_line import EXACT_COMMANDS, decode_command_line
from pipeline.stomp.commands import ALL_COMMANDS


@pytest.mark.parametrize(
    ("line", "version", "lenient", "command", "kinds"),
    [
        (b"SEND", "1.2", False, "SEND", []),
        (b"SEND\r", "1.2", False, "SEND", []),
        (b"SEND\r", "1.0", False, "SEND", ["crlf_before_1_2"]),
        (b"SEND\r", "1.0", True, "SEND", ["trailing_whitespace"]),
        (b"send", "1.0", False, "send", ["unknown_command"]),
        (b"send  ", "1.0", True, "SEND", ["trailing_whitespace", "lowercase_command"]),
        (b"NACK", "1.0", False, "NACK", ["command_not_in_version"]),
        (b"FOO", "1.1", True, "FOO", ["unknown_command"]),
        (b"\xffX", "1.2", False, "\ufffdX", ["invalid_utf8", "unknown_command"]),
    ],
)
def test_decode_command_line(
    line: bytes, version: str, lenient: bool, command: str, kinds: list[str]
) -> None:
    found, problems = decode_command_line(line, 42, version, lenient)
    assert found == command
    assert [kind for kind, _, _ in problems] == kinds
    assert all(offset == 42 for _, offset, _ in problems)


def test_exact_commands_per_version() -> None:
    assert set(EXACT_COMMANDS["1.2"].values()) == ALL_COMMANDS
    assert set(EXACT_COMMANDS["1.0"].values()) == ALL_COMMANDS - {"NACK"}
