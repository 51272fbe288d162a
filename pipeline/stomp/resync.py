"""Finding a plausible frame start in bytes that may begin inside a frame.

A frame plausibly starts where, after optional EOLs, a known command fills a whole line. The
decoder checks that at the resync point itself and then after every NUL (a frame's end).
"""

from __future__ import annotations

from pipeline.stomp.commands import ALL_COMMANDS, LONGEST_COMMAND

_COMMAND_BYTES = frozenset(command.encode() for command in ALL_COMMANDS)
_MAX_EOL_RUN = 1024  # a longer run of EOLs is not worth keeping in memory as a maybe-prefix
_LENIENT_PADDING = 16  # trailing spaces tolerated after a command in lenient mode


def plausible_frame_start(buf: bytes | bytearray, index: int, lenient: bool) -> bool | None:
    """Whether a frame plausibly starts at ``buf[index]`` (after EOLs); None if ``buf`` ends
    before that can be decided."""
    end = len(buf)
    i = index
    while i < end and buf[i] in (10, 13):
        if buf[i] == 13:
            if i + 1 >= end:
                return None
            if buf[i + 1] != 10:
                return False
            i += 1
        i += 1
        if i - index > _MAX_EOL_RUN:
            return False
    if i >= end:
        return None
    window = LONGEST_COMMAND + 2 + (_LENIENT_PADDING if lenient else 0)
    lf = buf.find(b"\n", i, i + window)
    if lf < 0:
        if end >= i + window:
            return False
        return None if _could_grow_into_command(bytes(buf[i:end]), lenient) else False
    return _is_command(bytes(buf[i:lf]), lenient)


def _normalise(line: bytes, lenient: bool) -> bytes:
    if line[-1:] == b"\r":
        line = line[:-1]
    if lenient:
        line = line.rstrip(b" \r").upper()
    return line


def _is_command(line: bytes, lenient: bool) -> bool:
    return _normalise(line, lenient) in _COMMAND_BYTES


def _could_grow_into_command(partial: bytes, lenient: bool) -> bool:
    stem = _normalise(partial, lenient)
    if lenient and stem in _COMMAND_BYTES:
        return True
    return any(command.startswith(stem) for command in _COMMAND_BYTES)
