"""Mask ``passcode`` header values of CONNECT/STOMP frames in the captured copy of a stream.

Sans-IO chunk filter, streaming: every chunk is masked in place and handed back at once with
its own read time and length, so sequence numbers, segment sizes and frame lengths in the
capture stay exactly those of the traffic, and nothing is held back whatever the size of a
frame. The forwarded bytes are never changed: only the capture copy is.

The filter follows STOMP framing across the whole stream (EOLs between frames, command line,
header lines up to a blank line, a body of ``content-length`` bytes or up to NUL) and masks,
in every frame whose command could be read as CONNECT or STOMP, the value of every header
whose name could be read as ``passcode``. It errs on the side of masking, as brokers differ:
- command: surrounding whitespace ignored, any case, and anything that starts with CONNECT or
  STOMP (ActiveMQ dispatches on ``startsWith``);
- header name: escapes decoded (``\\c`` ``\\\\`` ``\\n`` ``\\r`` ``\\t``, and ``\\x`` read as
  ``x``), whitespace anywhere dropped (STOMP 1.0 servers trim), any case, and any name that
  contains ``passcode``; a name longer than MAX_NAME bytes is masked too;
- value: everything after the first colon up to LF but NULs (a CR before the LF is kept unless
  it is the last byte of a chunk: then it is masked, as it may belong to the value).

A NUL before a frame's blank line ends the frame there, as the lake's decoder reads it, so what
follows is framed as a new frame. Brokers that read the NUL as an ordinary byte see the same
frame go on, so the frame after such a NUL counts as CONNECT when the one it cut was.

A stream that opens with ``GET `` (a WebSocket upgrade) has the request target's credential
parameters masked as well (`RequestTargetMasker`, over the request line's first 64 KiB, as far
as the lake reads an upgrade and farther than servers take): the value of every query or fragment
parameter whose name spells a credential, by the rule the lake masks them with
(`pipeline.session.privacy.SECRET_PARAMETERS`). The WebSocket frames that follow are not
looked into.
"""

from __future__ import annotations

import re
from enum import Enum
from urllib.parse import unquote_plus

from pipeline.session.privacy import SECRET_PARAMETERS

FILLER = ord("*")
CONNECT_PREFIXES = (b"CONNECT", b"STOMP")
MAX_NAME = 1024  # a longer header name is not looked at: its value is masked
MAX_COMMAND = 64  # a longer command line is not CONNECT or STOMP to any broker
MAX_LENGTH_DIGITS = 24  # a larger content-length is a body no capture ends
_NAME_END = re.compile(rb"[:\n\0]")
_ESCAPE = re.compile(rb"\\(.)", re.DOTALL)
_ESCAPED = {b"c": b":", b"n": b"\n", b"r": b"\r", b"t": b"\t", b"\\": b"\\"}
_WHITESPACE = re.compile(rb"\s+")
_LENGTH_VALUE = re.compile(rb"(\s*)(\d*)(\s*)")
_NOT_LETTER = re.compile(r"[^a-z]")
_REQUEST_METHOD = b"GET "
_MASK_ALL_BUT_NUL = bytes([0] + [FILLER] * 255)
MAX_REQUEST_LINE = 64 * 1024  # as the lake bounds an upgrade's head


def is_passcode_name(name: bytes) -> bool:
    """Whether a broker could read this raw header name as ``passcode`` (erring on yes)."""
    decoded = _ESCAPE.sub(lambda m: _ESCAPED.get(m[1], m[1]), name)
    return b"passcode" in _WHITESPACE.sub(b"", decoded).lower()


def is_credential_parameter(name: bytes) -> bool:
    """Whether a URL parameter of this raw name holds a credential (%-escapes decoded, ``+``
    read as a space, case and everything but letters ignored)."""
    decoded = unquote_plus(name.decode("latin-1"), encoding="latin-1").lower()
    return _NOT_LETTER.sub("", decoded) in SECRET_PARAMETERS


class RequestTargetMasker:
    """Masks, with ``*`` of the same length, the credential parameters' values in the request
    line of a stream that opens with ``GET ``; streaming, byte by byte over that line only."""

    __slots__ = ("_state", "_name", "_seen", "masked")

    def __init__(self) -> None:
        self._state = "method"  # method, path, name, value, secret, done
        self._name = bytearray()  # the method so far, then the parameter name so far
        self._seen = 0
        self.masked = 0  # credential values masked

    @property
    def done(self) -> bool:
        return self._state == "done"

    def feed(self, data: bytes, buf: bytearray | None) -> bytearray | None:
        """Mask ``data``'s share of the request line into ``buf`` (made when first needed)."""
        state, name = self._state, self._name
        pos, end = 0, min(len(data), MAX_REQUEST_LINE - self._seen)  # wherever chunks cut it
        while pos < end and state != "done":
            byte = data[pos]
            if state == "method":
                name.append(byte)
                if not _REQUEST_METHOD.startswith(name):
                    state = "done"
                elif len(name) == len(_REQUEST_METHOD):
                    state = "path"
            elif byte in b" \r\n":
                state = "done"
            elif state == "path":
                if byte in b"?#":
                    state = "name"
                    name.clear()
            elif byte in b"&;#":
                state = "name"
                name.clear()
            elif state == "name":
                if byte == 0x3D:  # "="
                    secret = len(name) > MAX_NAME or is_credential_parameter(bytes(name))
                    state = "secret" if secret else "value"
                    self.masked += secret
                elif len(name) <= MAX_NAME:
                    name.append(byte)
            elif state == "secret":
                if buf is None:
                    buf = bytearray(data)
                buf[pos] = FILLER
            pos += 1
        self._seen += pos
        self._state = "done" if self._seen >= MAX_REQUEST_LINE else state
        return buf


def compact_length_value(text: bytes) -> bytes:
    """A text of at most MAX_LENGTH_DIGITS + 2 bytes that reads as a ``content-length`` value
    (stripped, all digits, and the count it gives) as ``text`` does, whatever follows either:
    what the masker keeps of a long value, so that how the stream was cut into chunks never
    changes where a body ends."""
    match = _LENGTH_VALUE.fullmatch(text)
    if match is None:
        return b"x"
    lead, digits, trail = match.groups()
    digits = digits.lstrip(b"0") or digits[:1]
    if len(digits) > MAX_LENGTH_DIGITS:
        digits = b"9" * MAX_LENGTH_DIGITS
    return lead[:1] + digits + trail[:1]


def is_connect_command(line: bytes | bytearray) -> bool:
    return line.strip().upper().startswith(CONNECT_PREFIXES)


def has_connect_command(commands: bytes) -> bool:
    """Whether one of the NUL-separated ``commands`` is one `is_connect_command` would take (a
    search for the word, not for each NUL: binary bytes hold NULs by the thousand)."""
    upper = commands.upper()
    for word in CONNECT_PREFIXES:
        at = upper.find(word)
        while at >= 0:
            if not upper[upper.rfind(b"\0", 0, at) + 1 : at].strip():
                return True
            at = upper.find(word, at + 1)
    return False


class State(Enum):
    BETWEEN = "between frames"  # EOLs (heart-beats) until a command starts
    COMMAND = "command line"
    NAME = "header name"
    VALUE = "header value"  # passed through
    MASKED_VALUE = "passcode value"
    LENGTH_VALUE = "content-length value"
    BODY_LENGTH = "body of content-length bytes"
    BODY_END = "NUL after a content-length body"
    BODY_NUL = "body up to NUL"


class PasscodeMasker:
    """ChunkFilter: ``feed`` returns the (time, bytes) pieces to capture, one per chunk."""

    __slots__ = (
        "_state",
        "_text",
        "_connect",
        "_content_length",
        "_remaining",
        "_request",
        "_inherited",
        "_nul_in_value",
        "_after_nul",
        "masked",
    )

    def __init__(self) -> None:
        self._state = State.BETWEEN
        self._text = bytearray()  # command line, header name or content-length value so far
        self._connect = False  # the current frame is CONNECT/STOMP
        self._inherited = False  # the next frame counts as CONNECT: a NUL cut one short
        self._nul_in_value = False  # the passcode value being masked has a NUL
        self._after_nul = False  # ... and something but CR after its last NUL
        self._content_length: int | None = None
        self._remaining = 0
        self._request: RequestTargetMasker | None = RequestTargetMasker()
        self.masked = 0  # passcode values masked (counted when their masking starts)

    def feed(self, ts_ns: int, data: bytes) -> list[tuple[int, bytes]]:
        if self._request is not None:
            buf = self._request.feed(data, None)
            self.masked += self._request.masked
            self._request.masked = 0
            if self._request.done:
                self._request = None
            return self._feed(ts_ns, data, buf)
        return self._feed(ts_ns, data, None)

    def _feed(self, ts_ns: int, data: bytes, buf: bytearray | None) -> list[tuple[int, bytes]]:
        if self._state is State.BODY_LENGTH and len(data) <= self._remaining:
            self._remaining -= len(data)  # the bulk case: a chunk inside a body
            if not self._remaining:
                self._state = State.BODY_END
            return [(ts_ns, data if buf is None else bytes(buf))]
        pos, size = 0, len(data)
        while pos < size:
            state = self._state
            if state is State.MASKED_VALUE:
                eol = data.find(b"\n", pos)
                end = size if eol < 0 else eol
                if eol > pos and data[eol - 1] == 0x0D:
                    end -= 1
                if end > pos:
                    if buf is None:
                        buf = bytearray(data)
                    self._mask_value(data, buf, pos, end)
                if eol < 0:
                    return [(ts_ns, bytes(buf) if buf is not None else data)]
                pos = eol + 1
                self._end_masked_value()
            else:
                pos = self._step(state, data, pos, size)
        return [(ts_ns, bytes(buf) if buf is not None else data)]

    def flush(self) -> list[tuple[int, bytes]]:
        return []

    def _mask_value(self, data: bytes, buf: bytearray, start: int, end: int) -> None:
        """Mask ``data[start:end]`` of a passcode value into ``buf``, NULs kept: a NUL ends the
        frame for the lake's decoder, and the rest of the line (masked too) starts a new one."""
        buf[start:end] = data[start:end].translate(_MASK_ALL_BUT_NUL)
        nul = data.rfind(b"\0", start, end)
        if nul >= 0:
            self._nul_in_value, self._after_nul = True, False
            self._content_length = None  # the new frame's headers start after the NUL
            start = nul + 1
        if self._nul_in_value and data[start:end].strip(b"\r"):
            self._after_nul = True

    def _end_masked_value(self) -> None:
        if self._nul_in_value and not self._after_nul:
            self._end_early(True)  # the line ended at the NUL: what follows is between frames
        else:
            self._start_name()  # a new frame's command line after a NUL: its headers follow
        self._nul_in_value = self._after_nul = False

    def _end_early(self, connect: bool) -> None:
        """A NUL ended the frame before its blank line."""
        self._state = State.BETWEEN
        self._inherited = connect

    def _start_name(self) -> None:
        self._state = State.NAME
        self._text.clear()

    def _step(self, state: State, data: bytes, pos: int, size: int) -> int:
        """Advance over unmasked bytes from ``pos``; returns the new position."""
        if state is State.BETWEEN:
            while pos < size and data[pos] in b"\r\n\0":
                pos += 1
            if pos < size:
                self._state = State.COMMAND
                self._text.clear()
                self._content_length = None
            return pos
        if state is State.COMMAND:
            eol = data.find(b"\n", pos)
            end = size if eol < 0 else eol
            nul = data.rfind(b"\0", pos, end)
            if nul >= 0:
                # each NUL in the line ends a frame of a command alone; the rest starts the next
                cut = bytes(self._text) + data[pos:nul]
                self._end_early(self._inherited or has_connect_command(cut))
                return nul + 1
            self._add_to_command(data[pos:end])
            if eol < 0:
                return size
            self._connect = self._inherited or is_connect_command(self._text)
            self._inherited = False
            self._start_name()
            return eol + 1
        if state is State.NAME:
            return self._name(data, pos, size)
        if state in (State.VALUE, State.LENGTH_VALUE):
            eol = data.find(b"\n", pos)
            end = size if eol < 0 else eol
            nul = data.find(b"\0", pos, end)
            if nul >= 0:
                self._end_early(self._connect)
                return nul + 1
            if state is State.LENGTH_VALUE:
                self._text += data[pos:end]
                if len(self._text) > 2 * MAX_LENGTH_DIGITS:
                    self._text[:] = compact_length_value(bytes(self._text))
            if eol < 0:
                return size
            if state is State.LENGTH_VALUE:
                value = bytes(self._text).strip()
                if value.isdigit():
                    self._content_length = int(value)
            self._start_name()
            return eol + 1
        if state is State.BODY_LENGTH:
            take = min(self._remaining, size - pos)
            self._remaining -= take
            if not self._remaining:
                self._state = State.BODY_END
            return pos + take
        if state is State.BODY_END:
            if data[pos] == 0:
                self._state = State.BETWEEN
                return pos + 1
            self._state = State.BODY_NUL  # not where content-length said: read up to NUL
            return pos
        nul = data.find(b"\0", pos)  # BODY_NUL
        if nul < 0:
            return size
        self._state = State.BETWEEN
        return nul + 1

    def _add_to_command(self, piece: bytes) -> None:
        """Keep the command line's first MAX_COMMAND bytes after any leading whitespace (which
        brokers trim, however long), wherever the chunks cut it."""
        text = self._text
        if not text:
            piece = piece.lstrip()
        text += piece[: MAX_COMMAND - len(text)]

    def _name(self, data: bytes, pos: int, size: int) -> int:
        match = _NAME_END.search(data, pos)
        end = size if match is None else match.start()
        if len(self._text) <= MAX_NAME:
            self._text += data[pos : min(end, pos + MAX_NAME + 1)]
        if match is None:
            return size
        found = data[end]
        if found == 0x3A:  # ":"
            name = bytes(self._text)
            if self._connect and (len(name) > MAX_NAME or is_passcode_name(name)):
                self._state = State.MASKED_VALUE
                self.masked += 1
            elif self._content_length is None and name.strip().lower() == b"content-length":
                self._state = State.LENGTH_VALUE
                self._text.clear()
            else:
                self._state = State.VALUE
        elif found == 0x0A:  # "\n": a blank line ends the headers; a line without colon is
            if self._text.rstrip(b"\r"):  # skipped
                self._text.clear()
            elif self._content_length is not None:
                self._state = State.BODY_LENGTH
                self._remaining = self._content_length
                if not self._remaining:
                    self._state = State.BODY_END
            else:
                self._state = State.BODY_NUL
        else:  # NUL: the frame ends without a body
            self._end_early(self._connect)
        return end + 1
