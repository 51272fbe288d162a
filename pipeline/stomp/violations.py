"""Violation kinds the codec reports. Each is a stable snake_case string stored in tables.

A violation never stops decoding: it is reported (as a stream-level ``Violation`` event or inside
``Frame.violations``) and the decoder keeps going. Details never quote header values.
"""

from __future__ import annotations

# Stream-level kinds (returned as Violation events).
RESYNC_SKIPPED = "resync_skipped"
"""Bytes were discarded to reach a plausible frame start (stream began mid-frame, after a gap, or
after a framing error). ``offset`` is where skipping began, ``detail`` says how many bytes."""
FRAME_CUT_BY_GAP = "frame_cut_by_gap"
"""A frame in progress lost bytes to a capture gap and was dropped; ``offset`` is its start."""
TRUNCATED_FRAME = "truncated_frame"
"""The stream ended inside a frame; ``offset`` is the frame start."""
CONTENT_LENGTH_MISMATCH = "content_length_mismatch"
"""The byte after a ``content-length`` body is not NUL; the frame is dropped and the decoder
resyncs from the body start. ``offset`` is where the NUL was expected."""
COMMAND_TOO_LONG = "command_too_long"
"""The command line exceeds ``Limits.max_command``; the frame is dropped and the decoder resyncs."""
HEADER_LINE_TOO_LONG = "header_line_too_long"
"""A header line exceeds ``Limits.max_header_line``; the frame is dropped, then resync."""
TOO_MANY_HEADERS = "too_many_headers"
"""More than ``Limits.max_headers`` header lines; the frame is dropped and the decoder resyncs."""
BODY_TOO_LARGE = "body_too_large"
"""The body (announced or read so far) exceeds ``Limits.max_body``; dropped, then resync."""
STRAY_NUL = "stray_nul"
"""NUL byte(s) between frames, where a command was expected; they are skipped."""
DATA_AFTER_EOF = "data_after_eof"
"""``feed`` was called after ``feed_eof``; the data is ignored."""

# Frame-level kinds (inside Frame.violations; the frame is still returned).
UNKNOWN_COMMAND = "unknown_command"
"""The command is not a STOMP command; it is kept as sent."""
COMMAND_NOT_IN_VERSION = "command_not_in_version"
"""A known command that the frame's version does not define (NACK in 1.0)."""
UNEXPECTED_BODY = "unexpected_body"
"""A non-empty body on a command that must not have one (only SEND, MESSAGE, ERROR may)."""
INVALID_CONTENT_LENGTH = "invalid_content_length"
"""``content-length`` is not a decimal byte count; the body ended at the first NUL instead."""
INVALID_UTF8 = "invalid_utf8"
"""A command or header line is not UTF-8; undecodable bytes became U+FFFD."""
UNDEFINED_ESCAPE = "undefined_escape"
"""A backslash escape the version does not define; the raw header text is kept."""
HEADER_WITHOUT_COLON = "header_without_colon"
"""A header line with no ``:``; the line is left out of the headers."""
EMPTY_HEADER_NAME = "empty_header_name"
"""A header line starting with ``:``; it is kept with an empty name."""
MISSING_BLANK_LINE = "missing_blank_line"
"""The frame's NUL came before the blank line that ends the headers: the frame ends there, with
the header lines read so far and an empty body."""
CRLF_BEFORE_1_2 = "crlf_before_1_2"
"""A CRLF line end in a 1.0 or 1.1 frame (only 1.2 allows it); the CR is stripped anyway."""

# Leniencies: reported only in lenient mode, where the early protocol form is accepted.
LOWERCASE_COMMAND = "lowercase_command"
"""The command was not upper case and was upper-cased."""
UPPERCASE_HEADER_NAME = "uppercase_header_name"
"""A header name was not lower case and was lower-cased."""
TRAILING_WHITESPACE = "trailing_whitespace"
"""Trailing spaces (or CR before 1.2) on a command or header line were stripped."""
LEADING_SPACE_IN_VALUE = "leading_space_in_value"
"""Leading spaces in a header value were stripped."""

STREAM_KINDS: frozenset[str] = frozenset(
    {
        RESYNC_SKIPPED,
        FRAME_CUT_BY_GAP,
        TRUNCATED_FRAME,
        CONTENT_LENGTH_MISMATCH,
        COMMAND_TOO_LONG,
        HEADER_LINE_TOO_LONG,
        TOO_MANY_HEADERS,
        BODY_TOO_LARGE,
        STRAY_NUL,
        DATA_AFTER_EOF,
    }
)
FRAME_KINDS: frozenset[str] = frozenset(
    {
        UNKNOWN_COMMAND,
        COMMAND_NOT_IN_VERSION,
        UNEXPECTED_BODY,
        INVALID_CONTENT_LENGTH,
        INVALID_UTF8,
        UNDEFINED_ESCAPE,
        HEADER_WITHOUT_COLON,
        EMPTY_HEADER_NAME,
        MISSING_BLANK_LINE,
        CRLF_BEFORE_1_2,
        LOWERCASE_COMMAND,
        UPPERCASE_HEADER_NAME,
        TRAILING_WHITESPACE,
        LEADING_SPACE_IN_VALUE,
    }
)
ALL_KINDS: frozenset[str] = STREAM_KINDS | FRAME_KINDS
