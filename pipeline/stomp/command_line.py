"""Decoding a frame's command line into its canonical command name."""

from __future__ import annotations

from pipeline.stomp import violations as v
from pipeline.stomp.commands import ALL_COMMANDS, COMMANDS_ADDED_IN_1_1, VERSIONS

Problem = tuple[str, int, str]

# Per version, exact wire spelling -> command: the common case, needing no decoding and raising
# no problem. Anything else goes through decode_command_line.
EXACT_COMMANDS: dict[str, dict[bytes, str]] = {
    version: {
        command.encode(): command
        for command in ALL_COMMANDS
        if version != "1.0" or command not in COMMANDS_ADDED_IN_1_1
    }
    for version in VERSIONS
}


def decode_command_line(
    line: bytes, offset: int, version: str, lenient: bool
) -> tuple[str, list[Problem]]:
    """The command on ``line`` (without its LF) at stream ``offset``, and any problems.

    Unknown commands are returned as sent (decoded, undecodable bytes as U+FFFD).
    """
    problems: list[Problem] = []
    if line[-1:] == b"\r":
        line = line[:-1]
        if version != "1.2":
            kind = v.TRAILING_WHITESPACE if lenient else v.CRLF_BEFORE_1_2
            problems.append((kind, offset, "command line"))
    if lenient and line[-1:] in (b" ", b"\r"):
        line = line.rstrip(b" \r")
        problems.append((v.TRAILING_WHITESPACE, offset, "command line"))
    command = EXACT_COMMANDS["1.2"].get(line)
    if command is None:
        try:
            text = line.decode()
        except UnicodeDecodeError:
            text = line.decode(errors="replace")
            problems.append((v.INVALID_UTF8, offset, "command line is not UTF-8"))
        upper = text.upper()
        if lenient and upper in ALL_COMMANDS:
            command = upper
            problems.append((v.LOWERCASE_COMMAND, offset, f"{text!r} read as {upper}"))
        else:
            command = text
            problems.append((v.UNKNOWN_COMMAND, offset, f"{text[:64]!r}"))
    if version == "1.0" and command in COMMANDS_ADDED_IN_1_1:
        problems.append((v.COMMAND_NOT_IN_VERSION, offset, f"{command} is not in STOMP 1.0"))
    return command, problems
