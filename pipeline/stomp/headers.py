"""Decoding a frame's header lines (the bytes between the command line and the blank line).

Returns plain tuples ``(kind, offset, detail)`` for problems so this module needs no event types.
Details name headers but never quote values (a value may be a passcode).
"""

from __future__ import annotations

from pipeline.stomp import speedups
from pipeline.stomp import violations as v
from pipeline.stomp.commands import UNESCAPED_COMMANDS_1_2

Problem = tuple[str, int, str]


def escapes_apply(version: str, command: str) -> bool:
    """Whether header escapes are decoded: from 1.1 on, except CONNECT/CONNECTED in 1.2."""
    if version == "1.0":
        return False
    return not (version == "1.2" and command in UNESCAPED_COMMANDS_1_2)


# The compiled decoder's escape setting per version: 0 none, 1 STOMP 1.1, 2 STOMP 1.2.
ESCAPE_MODES = {"1.0": 0, "1.1": 1, "1.2": 2}


def unescape(text: str, version: str) -> str | None:
    """Undo ``\\n``, ``\\c``, ``\\\\`` (and ``\\r`` in 1.2); None on an undefined escape."""
    pieces = text.split("\\\\")  # escaped backslashes first: backslash runs pair from the left
    for index, piece in enumerate(pieces):
        if "\\" in piece:
            piece = piece.replace("\\n", "\n").replace("\\c", ":")
            if version == "1.2":
                piece = piece.replace("\\r", "\r")
            if "\\" in piece:
                return None
            pieces[index] = piece
    return "\\".join(pieces)


def decode_header_block(
    raw: bytes, offset: int, version: str, command: str, lenient: bool
) -> tuple[list[tuple[str, str]], list[Problem]]:
    """Header lines of ``raw`` (LF separated, no final EOL) as (name, value) pairs in wire order.

    ``offset`` is the stream offset of ``raw[0]``, used for the problems' offsets.
    """
    if not raw:
        return [], []
    clean = None if lenient else _without_crlf(raw, version)
    if clean:
        compiled = speedups.compiled
        if compiled is None:
            pairs = _decode_clean(clean, version, command)
        else:
            mode = ESCAPE_MODES[version]
            if mode == 2 and command in UNESCAPED_COMMANDS_1_2:
                mode = 0
            pairs = compiled.decode_headers(clean, mode)
        if pairs is not None:
            return pairs, []
    return _decode_line_by_line(raw, offset, version, command, lenient)


def _without_crlf(raw: bytes, version: str) -> bytes | None:
    """``raw`` with its 1.2 CRLF line ends made LF, or None if a CR remains (a CR elsewhere, or
    CRLF before 1.2): the line-by-line decoder must then look at it."""
    if b"\r" not in raw:
        return raw
    if version != "1.2":
        return None
    raw = raw.replace(b"\r\n", b"\n")
    if raw[-1:] == b"\r":  # the last line's CR (the block excludes its final LF)
        raw = raw[:-1]
    return None if b"\r" in raw else raw


def _decode_clean(raw: bytes, version: str, command: str) -> list[tuple[str, str]] | None:
    """The fast path for well-formed blocks; None sends the block to the line-by-line path."""
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        return None
    if text[0] == ":" or "\n:" in text:
        return None
    line_count = text.count("\n") + 1
    if raw.translate(None, _ALL_BUT_LF_AND_COLON) == _skeleton(line_count):
        # Exactly one colon per line: split names and values in one go.
        flat = text.replace("\n", ":").split(":")
    else:
        parts = [line.partition(":") for line in text.split("\n")]
        if any(not colon for _, colon, _ in parts):
            return None
        flat = [piece for name, _, value in parts for piece in (name, value)]
    if "\\" in text and escapes_apply(version, command):
        if "\x00" in text:
            return None
        unescaped = unescape("\x00".join(flat), version)  # NUL: a separator no header holds
        if unescaped is None:
            return None
        flat = unescaped.split("\x00")
    pieces = iter(flat)
    return list(zip(pieces, pieces, strict=True))


_ALL_BUT_LF_AND_COLON = bytes(byte for byte in range(256) if byte not in b"\n:")
_SKELETONS: dict[int, bytes] = {}


def _skeleton(line_count: int) -> bytes:
    """What a block of ``line_count`` lines with one colon each keeps of its LFs and colons."""
    skeleton = _SKELETONS.get(line_count)
    if skeleton is None:
        skeleton = b":\n" * (line_count - 1) + b":"
        if line_count <= 64:
            _SKELETONS[line_count] = skeleton
    return skeleton


def _decode_line_by_line(
    raw: bytes, offset: int, version: str, command: str, lenient: bool
) -> tuple[list[tuple[str, str]], list[Problem]]:
    problems: list[Problem] = []
    once: dict[str, int] = {}  # per-frame kinds: first offset; reported once with a line count
    counts: dict[str, int] = {}

    def note_once(kind: str, at: int) -> None:
        once.setdefault(kind, at)
        counts[kind] = counts.get(kind, 0) + 1

    use_escapes = escapes_apply(version, command)
    pairs: list[tuple[str, str]] = []
    line_offset = offset
    for line in raw.split(b"\n"):
        at = line_offset
        line_offset += len(line) + 1
        if line[-1:] == b"\r":
            line = line[:-1]
            if version != "1.2":
                note_once(v.TRAILING_WHITESPACE if lenient else v.CRLF_BEFORE_1_2, at)
        if lenient and line[-1:] in (b" ", b"\r"):
            line = line.rstrip(b" \r")
            note_once(v.TRAILING_WHITESPACE, at)
        try:
            text = line.decode()
        except UnicodeDecodeError:
            text = line.decode(errors="replace")
            problems.append((v.INVALID_UTF8, at, "header line is not UTF-8"))
        name, colon, value = text.partition(":")
        if not colon:
            problems.append((v.HEADER_WITHOUT_COLON, at, f"{len(line)}-byte line has no ':'"))
            continue
        if lenient:
            lowered = name.lower()
            if lowered != name:
                name = lowered
                note_once(v.UPPERCASE_HEADER_NAME, at)
            if value[:1] == " ":
                value = value.lstrip(" ")
                note_once(v.LEADING_SPACE_IN_VALUE, at)
        if use_escapes and ("\\" in name or "\\" in value):
            plain_name, plain_value = unescape(name, version), unescape(value, version)
            if plain_name is None or plain_value is None:
                problems.append(
                    (v.UNDEFINED_ESCAPE, at, f"header {name[:64]!r}: undefined escape, kept raw")
                )
            else:
                name, value = plain_name, plain_value
        if not name:
            problems.append((v.EMPTY_HEADER_NAME, at, "header line starts with ':'"))
        pairs.append((name, value))
    for kind, at in once.items():
        problems.append((kind, at, f"{counts[kind]} line(s)"))
    problems.sort(key=_offset_of)
    return pairs, problems


def _offset_of(problem: Problem) -> int:
    return problem[1]
