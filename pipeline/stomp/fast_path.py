"""The decoder's fast path: clean LF-only frames wholly in the buffer, framed in one tight loop.

It stops, leaving the position on the frame, at anything else (a partial frame, CR, NUL before
the blank line, an unknown command, a bad or overrunning content-length, a body where none is
allowed, a header block past the size that needs line-by-line limit checks); the decoder's state
machine takes that frame, which decodes the same grammar with every check. Never lenient.

``scan_python`` leaves header lines undecoded (decoded on first access); its compiled twin
(``_speedups.scan``, used when built) decodes clean header blocks right away, since that is
cheap there. Both yield equal events.
"""

from __future__ import annotations

from pipeline.stomp import speedups
from pipeline.stomp.command_line import EXACT_COMMANDS
from pipeline.stomp.commands import NO_BODY_COMMANDS, UNESCAPED_COMMANDS_1_2
from pipeline.stomp.events import (
    FRAME_SLOTS,
    HEARTBEAT_SLOTS,
    Event,
    Frame,
    HeartBeat,
    heartbeat,
    undecoded_frame,
)
from pipeline.stomp.headers import ESCAPE_MODES
from pipeline.stomp.limits import Limits

CONTENT_LENGTH_LINE = b"\ncontent-length:"


def scan(
    buf: bytes, pos: int, base: int, version: str, limits: Limits, out: list[Event], limit: int
) -> int:
    """Append up to ``limit`` (-1: any number of) heart-beats and clean frames found from
    ``buf[pos]`` (stream offset ``base + pos``) to ``out``; returns the position reached."""
    compiled = speedups.compiled
    if compiled is None:
        return scan_python(buf, pos, base, version, limits, out, limit)
    return compiled.scan(
        buf,
        pos,
        base,
        EXACT_COMMANDS[version],
        NO_BODY_COMMANDS,
        limits.max_command + 1,
        limits.head_always_within(),
        limits.max_body,
        limit,
        out,
        version,
        ESCAPE_MODES[version],
        UNESCAPED_COMMANDS_1_2,
        Frame,
        FRAME_SLOTS,
        HeartBeat,
        HEARTBEAT_SLOTS,
    )


def scan_python(
    buf: bytes, pos: int, base: int, version: str, limits: Limits, out: list[Event], limit: int
) -> int:
    end = len(buf)
    find = buf.find
    append = out.append
    exact = EXACT_COMMANDS[version]
    command_window = limits.max_command + 1
    head_window = limits.head_always_within()
    max_body = limits.max_body
    count = 0
    while count != limit and pos < end:
        if buf[pos] == 10:
            append(heartbeat(base + pos))
            pos += 1
            count += 1
            continue
        lf = find(b"\n", pos, pos + command_window)
        if lf < 0:
            break
        command = exact.get(buf[pos:lf])
        if command is None:
            break
        blank = find(b"\n\n", lf, lf + head_window + 2)
        if blank < 0 or find(b"\r", lf, blank) >= 0 or find(b"\x00", lf, blank) >= 0:
            break
        body_start = blank + 2
        at = find(CONTENT_LENGTH_LINE, lf, blank)
        if at < 0:
            length = None
            body_end = find(b"\x00", body_start)
            if body_end < 0 or body_end - body_start > max_body:
                break
        else:
            value = buf[at + 16 : find(b"\n", at + 16, blank + 1)]
            if not value.isdigit():
                break
            length = int(value)
            body_end = body_start + length
            if length > max_body or body_end >= end or buf[body_end] != 0:
                break
        if body_end > body_start and command in NO_BODY_COMMANDS:
            break
        append(
            undecoded_frame(
                command,
                buf[lf + 1 : blank],
                base + lf + 1,
                version,
                False,
                buf[body_start:body_end],
                base + pos,
                base + body_end + 1,
                length,
            )
        )
        pos = body_end + 1
        count += 1
    return pos
