"""The incremental, sans-IO STOMP decoder: ``feed`` bytes, then pull events.

No sockets, files or clocks: events carry stream byte offsets and callers attach times. Bad input
never raises; it becomes a ``Violation`` (a stream event, or inside ``Frame.violations``) and
decoding goes on, resyncing to the next plausible frame start when framing itself broke.

Two paths decode the same grammar. The fast path (``fast_path.scan``) frames clean LF-only
frames that are wholly in the buffer and stops at anything else; the state machine here
(``_idle``/``_head``/``_body``/``_resync``) then handles that case (partial frames, CRLF,
limits, bad input) one event at a time, after which the fast path resumes.

The buffer is immutable ``bytes`` while leftovers are small (chunks mostly hold whole frames and
slices are single copies) and becomes a ``bytearray`` when a frame spans many small chunks, so
feeding stays linear in the data size. Positions kept across ``feed`` calls are relative to the
pending frame's first byte, so rebasing the buffer never invalidates them.
"""

from __future__ import annotations

from collections import deque

from pipeline.compiled import set_slot_values, slot_values
from pipeline.stomp import violations as v
from pipeline.stomp.command_line import EXACT_COMMANDS, decode_command_line
from pipeline.stomp.commands import NO_BODY_COMMANDS, VERSIONS
from pipeline.stomp.events import Event, Frame, Violation, heartbeat, undecoded_frame
from pipeline.stomp.fast_path import CONTENT_LENGTH_LINE, scan
from pipeline.stomp.headers import decode_header_block
from pipeline.stomp.limits import Limits
from pipeline.stomp.resync import plausible_frame_start

__all__ = ["NEED_DATA", "Decoder", "Limits"]


class _NeedData:
    """Sentinel type: the decoder needs more bytes before it can emit another event."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NEED_DATA"

    def __reduce__(self) -> str:
        return "NEED_DATA"


NEED_DATA = _NeedData()

_IDLE, _NULS, _HEAD, _BODY, _RESYNC, _CLOSED = range(6)


class Decoder:
    """Decodes one direction of one STOMP connection."""

    __slots__ = (
        "_version",
        "lenient",
        "limits",
        "_buf",
        "_pos",
        "_base",
        "_state",
        "_pending",
        "_nl",
        "_scan",
        "_line_start",
        "_lines",
        "_head_end",
        "_body_start",
        "_content_length",
        "_command",
        "_problems",
        "_frame_version",
        "_header_list",
        "_resync_from",
        "_resync_here",
        "_nuls_from",
        "_eof_noted",
    )

    def __init__(
        self,
        version: str = "1.0",
        *,
        limits: Limits | None = None,
        lenient: bool = False,
        offset: int = 0,
        resync: bool = False,
    ) -> None:
        self.version = version
        self.lenient = lenient
        self.limits = limits or Limits()
        self._buf: bytes | bytearray = b""
        self._pos = 0  # index in _buf of the first byte not yet consumed into an event
        self._base = offset  # stream offset of _buf[0]
        self._pending: deque[Event] = deque()
        self._eof_noted = False
        self._reset_frame()
        self._resync_from = offset
        self._resync_here = True
        self._nuls_from = offset
        self._state = _RESYNC if resync else _IDLE

    def __getstate__(self) -> tuple[None, dict[str, object]]:
        return slot_values(self)

    def __setstate__(self, state: tuple[None, dict[str, object]]) -> None:
        set_slot_values(self, state)

    # -- public API ---------------------------------------------------------------------------

    @property
    def version(self) -> str:
        return self._version

    @version.setter
    def version(self, value: str) -> None:
        if value not in VERSIONS:
            raise ValueError(f"unsupported STOMP version {value!r}; expected one of {VERSIONS}")
        self._version = value

    @property
    def offset(self) -> int:
        return self._base + self._pos

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._state == _CLOSED:
            if data and not self._eof_noted:
                self._eof_noted = True
                detail = f"{len(data)} bytes ignored"
                self._pending.append(Violation(v.DATA_AFTER_EOF, self.offset, detail))
            return
        if not data:
            return
        if type(data) is not bytes:
            data = bytes(data)
        buf, pos = self._buf, self._pos
        left = len(buf) - pos
        self._base += pos
        self._pos = 0
        if left == 0:
            self._buf = data
        elif type(buf) is bytes and left <= len(data):
            self._buf = buf[pos:] + data  # copying at most twice the new data keeps this linear
        else:
            if type(buf) is bytearray:
                if pos:
                    del buf[:pos]
            else:
                buf = bytearray(buf[pos:])
            buf += data
            self._buf = buf

    def next_event(self) -> Event | _NeedData:
        if self._pending:
            return self._pending.popleft()
        if self._state == _IDLE and type(buf := self._buf) is bytes and not self.lenient:
            out: list[Event] = []
            self._fast(buf, out, 1)
            if out:
                return out[0]
        event = self._advance()
        return NEED_DATA if event is None else event

    def events(self) -> list[Event]:
        """Every event available now. All of them are decoded with the current version: use
        ``next_event`` to switch versions right after a CONNECT/CONNECTED frame."""
        out: list[Event] = []
        pending = self._pending
        while True:
            if pending:
                out.extend(pending)
                pending.clear()
            if self._state == _IDLE and type(buf := self._buf) is bytes and not self.lenient:
                self._fast(buf, out, -1)
            event = self._advance()
            if event is not None:
                out.append(event)
            elif not pending:
                return out

    def feed_gap(self, size: int) -> None:
        if size < 0:
            raise ValueError("gap size must be >= 0")
        self._drain()
        if self._state == _CLOSED:
            return
        buffered = len(self._buf) - self._pos
        if self._state == _NULS:
            self._pending.append(self._stray_nuls())
        elif self._state == _RESYNC:
            self._note_skipped(self._base + len(self._buf), "before a capture gap")
        elif buffered:
            detail = f"{buffered} bytes of an unfinished frame dropped before a {size}-byte gap"
            self._pending.append(Violation(v.FRAME_CUT_BY_GAP, self.offset, detail))
        self._base += len(self._buf) + size
        self._buf, self._pos = b"", 0
        self._resync_from = self._base
        self._scan = 0
        self._resync_here = True
        self._state = _RESYNC

    def feed_eof(self) -> None:
        self._drain()
        if self._state == _CLOSED:
            return
        buffered = len(self._buf) - self._pos
        if self._state == _NULS:
            self._pending.append(self._stray_nuls())
        elif self._state == _RESYNC:
            self._note_skipped(self._base + len(self._buf), "no frame start before end of stream")
        elif buffered:
            what = f"{self._command} frame" if self._state == _BODY else "frame"
            detail = f"stream ended {buffered} bytes into a {what}"
            self._pending.append(Violation(v.TRUNCATED_FRAME, self.offset, detail))
        self._base += len(self._buf)
        self._buf, self._pos = b"", 0
        self._state = _CLOSED

    # -- fast path ----------------------------------------------------------------------------

    def _fast(self, buf: bytes, out: list[Event], limit: int) -> None:
        """Append up to ``limit`` (-1: any number of) heart-beats and clean frames to ``out``;
        ``buf`` is ``self._buf``, when it is bytes."""
        self._pos = scan(buf, self._pos, self._base, self._version, self.limits, out, limit)

    # -- state machine ------------------------------------------------------------------------

    def _drain(self) -> None:
        while (event := self._advance()) is not None:
            self._pending.append(event)

    def _advance(self) -> Event | None:
        """The next event, or None when more data is needed."""
        while True:
            state = self._state
            if state == _IDLE:
                event = self._idle()
            elif state == _NULS:
                event = self._nuls()
            elif state == _HEAD:
                event = self._head()
            elif state == _BODY:
                event = self._body()
            elif state == _RESYNC:
                event = self._resync()
            else:
                return None
            if event is not None or self._state == state:
                return event

    def _reset_frame(self) -> None:
        self._nl = -1  # relative index of the command line's LF
        self._scan = 0  # relative index where the next search resumes
        self._line_start = 0
        self._lines = 0
        self._head_end = 0
        self._body_start = 0
        self._content_length: int | None = None
        self._command = ""
        self._problems: list[Violation] = []
        self._frame_version = self._version
        self._header_list: list[tuple[str, str]] | None = None

    def _idle(self) -> Event | None:
        buf, pos = self._buf, self._pos
        end = len(buf)
        if pos >= end:
            return None
        byte = buf[pos]
        if byte == 10:
            self._pos = pos + 1
            return heartbeat(self._base + pos)
        if byte == 13:
            if pos + 1 >= end:
                return None
            if buf[pos + 1] == 10:
                self._pos = pos + 2
                return heartbeat(self._base + pos, 2)
        elif byte == 0:
            self._nuls_from = self._base + pos
            self._state = _NULS
            return None
        self._reset_frame()
        self._state = _HEAD
        return self._head()

    def _nuls(self) -> Event | None:
        """Skip a run of stray NULs, reported once it ends (so however the run was chunked)."""
        buf, pos = self._buf, self._pos
        end = len(buf)
        while pos < end and buf[pos] == 0:
            pos += 1
        self._pos = pos
        if pos == end:
            return None
        self._state = _IDLE
        return self._stray_nuls()

    def _stray_nuls(self) -> Violation:
        count = self._base + self._pos - self._nuls_from
        return Violation(v.STRAY_NUL, self._nuls_from, f"{count} NUL byte(s) between frames")

    def _head(self) -> Event | None:
        buf, pos = self._buf, self._pos
        end = len(buf)
        limits = self.limits
        nl = self._nl
        if nl < 0:
            window_end = min(end, pos + limits.max_command + 2)
            found = buf.find(b"\n", pos, window_end)
            nul = buf.find(b"\x00", pos, found if found >= 0 else window_end)
            if nul >= 0:
                return self._frame_ended_early(nul)
            if found < 0:
                if end - pos > limits.max_command + 1:
                    return self._too_long(v.COMMAND_TOO_LONG, pos, limits.max_command)
                return None
            nl = self._nl = found - pos
            if nl > limits.max_command and not (
                nl == limits.max_command + 1 and buf[found - 1] == 13
            ):
                return self._too_long(v.COMMAND_TOO_LONG, pos, limits.max_command)
            self._line_start = nl + 1
        lf = pos + nl
        scan = pos + max(self._scan, nl)
        # The blank line is looked for only up to the first NUL, which ends the frame early if
        # it comes first: walking every LF to the end of the buffer made a buffer of many
        # short NUL-ended frames without blank lines quadratic.
        nul = buf.find(b"\x00", scan, end)
        head_end, body_start = _find_blank_line(buf, scan, end if nul < 0 else nul)
        if head_end >= 0:
            nul = -1
        if nul >= 0:
            return self._check_header_lines(nul, complete=False) or self._frame_ended_early(nul)
        if head_end < 0:
            # resume at the last LF: it may start a blank line whose bytes have not arrived
            self._scan = max(buf.rfind(b"\n", scan, end), scan) - pos
            return self._check_header_lines(end, complete=False)
        if head_end - lf > limits.head_always_within():
            problem = self._check_header_lines(head_end + 1, complete=True)
            if problem is not None:
                return problem
        self._head_end = head_end - pos
        self._body_start = self._scan = body_start - pos
        self._start_frame(lf)
        if self.lenient:
            self._content_length = self._lenient_content_length(lf + 1, head_end)
        else:
            found = buf.find(CONTENT_LENGTH_LINE, lf, head_end)
            if found >= 0:
                self._content_length = self._parse_content_length(found + 1, head_end)
        self._state = _BODY
        return self._body()

    def _body(self) -> Event | None:
        buf, pos = self._buf, self._pos
        body_start = pos + self._body_start
        length = self._content_length
        limits = self.limits
        if length is not None:
            if length > limits.max_body:
                return self._body_too_large(body_start)
            body_end = body_start + length
            if body_end >= len(buf):
                return None
            if buf[body_end] != 0:
                offset = self._base + body_end
                detail = f"no NUL after the {length}-byte {self._command} body; resyncing"
                self._enter_resync(pos, body_start, check_here=False)
                return Violation(v.CONTENT_LENGTH_MISMATCH, offset, detail)
        else:
            body_end = buf.find(b"\x00", pos + self._scan)
            if body_end < 0:
                self._scan = len(buf) - pos
                if len(buf) - body_start > limits.max_body:
                    return self._body_too_large(body_start)
                return None
            if body_end - body_start > limits.max_body:
                return self._body_too_large(body_start)
        body = buf[body_start:body_end]
        if body and self._command in NO_BODY_COMMANDS:
            detail = f"{len(body)}-byte body on {self._command}"
            self._problems.append(Violation(v.UNEXPECTED_BODY, self._base + body_start, detail))
        return self._finish_frame(pos + self._head_end, bytes(body), body_end)

    def _frame_ended_early(self, nul: int) -> Frame:
        """The frame's NUL came before the blank line: it ends there, body empty."""
        buf, pos = self._buf, self._pos
        lf = pos + self._nl if self._nl >= 0 else nul
        if lf > nul:
            lf = nul
        self._start_frame(lf)
        head_end = nul
        if buf[head_end - 1 : head_end] == b"\n" and head_end - 1 > lf:
            head_end -= 1
            if buf[head_end - 1 : head_end] == b"\r" and head_end - 1 > lf:
                head_end -= 1
        detail = "NUL before the blank line ending the headers; frame ends there"
        self._problems.append(Violation(v.MISSING_BLANK_LINE, self._base + nul, detail))
        if self.lenient:
            self._lenient_content_length(lf + 1, head_end)
        return self._finish_frame(max(head_end, lf), b"", nul)

    def _start_frame(self, lf: int) -> None:
        """Read the command line, which ends at buffer index ``lf``."""
        buf, pos = self._buf, self._pos
        self._frame_version = self._version
        line = bytes(buf[pos:lf])
        command = EXACT_COMMANDS[self._version].get(line)
        if command is None:
            command, problems = decode_command_line(
                line, self._base + pos, self._version, self.lenient
            )
            self._problems.extend(Violation(*problem) for problem in problems)
        self._command = command

    def _finish_frame(self, head_end: int, body: bytes, body_end: int) -> Frame:
        """Emit the frame whose header lines end at ``head_end`` and whose NUL is at
        ``body_end``, and go back to idle."""
        buf, pos, base = self._buf, self._pos, self._base
        problems = self._problems
        problems.sort(key=_offset_of)
        self._pos = body_end + 1
        self._state = _IDLE
        start, end = base + pos, base + body_end + 1
        if self._header_list is not None:
            return Frame(
                self._command,
                self._header_list,
                body,
                start,
                end,
                self._content_length,
                tuple(problems),
            )
        head_start = pos + self._nl + 1 if self._nl >= 0 else head_end
        return undecoded_frame(
            self._command,
            bytes(buf[head_start:head_end]),
            base + head_start,
            self._frame_version,
            False,
            body,
            start,
            end,
            self._content_length,
            problems,
        )

    def _resync(self) -> Event | None:
        buf, pos = self._buf, self._pos
        if self._resync_here:
            verdict = plausible_frame_start(buf, pos, self.lenient)
            if verdict is None:
                return None
            self._resync_here = False
            self._scan = 0
            if verdict:
                return self._finish_resync(pos)
        while True:
            nul = buf.find(b"\x00", pos + self._scan)
            if nul < 0:
                self._pos = len(buf)
                self._scan = 0
                return None
            verdict = plausible_frame_start(buf, nul + 1, self.lenient)
            if verdict is None:
                self._pos = nul + 1
                self._scan = 0
                self._resync_here = True
                return None
            if verdict:
                return self._finish_resync(nul + 1)
            self._scan = nul + 1 - pos

    # -- helpers ------------------------------------------------------------------------------

    def _enter_resync(self, skip_from: int, search_from: int, *, check_here: bool) -> None:
        """Skip bytes from buffer index ``skip_from`` on, looking for frame ends (NULs) from
        index ``search_from``; ``check_here`` tries ``skip_from`` itself as a frame start first."""
        self._resync_from = self._base + skip_from
        self._pos = skip_from
        self._scan = search_from - skip_from
        self._resync_here = check_here
        self._state = _RESYNC

    def _finish_resync(self, index: int) -> Event | None:
        self._pos = index
        self._state = _IDLE
        skipped = self._base + index - self._resync_from
        if skipped:
            detail = f"skipped {skipped} bytes to reach a frame start"
            return Violation(v.RESYNC_SKIPPED, self._resync_from, detail)
        return None

    def _note_skipped(self, upto: int, why: str) -> None:
        skipped = upto - self._resync_from
        if skipped:
            detail = f"skipped {skipped} bytes, {why}"
            self._pending.append(Violation(v.RESYNC_SKIPPED, self._resync_from, detail))

    def _too_long(self, kind: str, index: int, limit: int) -> Violation:
        offset = self._base + index
        detail = f"over the limit of {limit}; frame dropped"
        self._enter_resync(self._pos, self._pos, check_here=False)
        return Violation(kind, offset, detail)

    def _body_too_large(self, body_start: int) -> Violation:
        offset = self._base + body_start
        detail = f"{self._command} body over {self.limits.max_body} bytes; frame dropped"
        self._enter_resync(self._pos, body_start, check_here=False)
        return Violation(v.BODY_TOO_LARGE, offset, detail)

    def _check_header_lines(self, upto: int, *, complete: bool) -> Violation | None:
        """Check header lines from the last checked one up to buffer index ``upto`` against
        the limits; ``complete`` says whether the header block ends there."""
        buf, pos = self._buf, self._pos
        limits = self.limits
        start = pos + self._line_start
        lines = self._lines
        while True:
            lf = buf.find(b"\n", start, upto)
            if lf < 0:
                break
            if lf - start > limits.max_header_line + (buf[lf - 1] == 13):
                return self._too_long(v.HEADER_LINE_TOO_LONG, start, limits.max_header_line)
            lines += 1
            if lines > limits.max_headers:
                return self._too_long(v.TOO_MANY_HEADERS, start, limits.max_headers)
            start = lf + 1
        if not complete and upto - start > limits.max_header_line + 1:
            return self._too_long(v.HEADER_LINE_TOO_LONG, start, limits.max_header_line)
        self._line_start = start - pos
        self._lines = lines
        return None

    def _parse_content_length(self, line_start: int, head_end: int) -> int | None:
        buf = self._buf
        line_end = buf.find(b"\n", line_start, head_end + 1)
        value = bytes(buf[line_start + 15 : line_end])
        if value[-1:] == b"\r":
            value = value[:-1]
        return self._content_length_value(value, self._base + line_start)

    def _content_length_value(self, value: bytes, offset: int) -> int | None:
        if value.isdigit():
            return int(value)
        if (self.lenient or self._frame_version == "1.0") and value.strip(b" ").isdigit():
            return int(value.strip(b" "))
        detail = f"{len(value)}-byte value is not a byte count; body ends at the first NUL"
        self._problems.append(Violation(v.INVALID_CONTENT_LENGTH, offset, detail))
        return None

    def _lenient_content_length(self, head_start: int, head_end: int) -> int | None:
        """Lenient mode decodes headers right away: names are case-insensitive there."""
        raw = bytes(self._buf[head_start:head_end])
        offset = self._base + head_start
        header_list, problems = decode_header_block(
            raw, offset, self._frame_version, self._command, True
        )
        self._problems.extend(Violation(*problem) for problem in problems)
        self._header_list = header_list
        for name, value in header_list:
            if name == "content-length":
                return self._content_length_value(value.encode(), offset)
        return None


def _find_blank_line(buf: bytes | bytearray, start: int, end: int) -> tuple[int, int]:
    """The first blank line (LF or CRLF) that follows an LF at or after ``start``, as (index of
    that LF, index just after the blank line); (-1, -1) when the buffer holds none yet. Walks
    line by line: a search for one of the two forms alone could run far past the other."""
    lf = buf.find(b"\n", start, end)
    while lf >= 0:
        after = lf + 1
        if after < end and buf[after] == 10:
            return lf, after + 1
        if after + 1 < end and buf[after] == 13 and buf[after + 1] == 10:
            return lf, after + 2
        lf = buf.find(b"\n", after, end)
    return -1, -1


def _offset_of(violation: Violation) -> int:
    return violation.offset
