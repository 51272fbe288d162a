"""Events the decoder emits: frames, heart-beat EOLs and stream-level violations.

Events carry stream byte offsets, never times: callers map offsets to capture timestamps.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.compiled import set_slot_values, slot_values
from pipeline.stomp.headers import decode_header_block


@dataclass(slots=True, frozen=True)
class Violation:
    """A protocol problem: a stream-level event, or attached to a frame in ``Frame.violations``."""

    kind: str
    offset: int
    detail: str = ""


@dataclass(slots=True, frozen=True)
class HeartBeat:
    """An EOL between frames: a heart-beat, or the optional EOL after a frame's NUL.

    ``offset == previous_frame.end`` means it came directly after the NUL.
    """

    offset: int
    length: int = 1


class Frame:
    """One STOMP frame. Header lines may be left undecoded until the first access of
    ``header_list``, ``headers``, ``get`` or ``violations``; they are then decoded with the
    version rules in force when the frame was framed."""

    __slots__ = (
        "command",
        "body",
        "start",
        "end",
        "content_length",
        "_header_list",
        "_headers",
        "_violations",
        "_undecoded",
    )

    def __init__(
        self,
        command: str,
        header_list: list[tuple[str, str]] | None = None,
        body: bytes = b"",
        start: int = 0,
        end: int = 0,
        content_length: int | None = None,
        violations: tuple[Violation, ...] = (),
    ) -> None:
        self.command = command
        self.body = body
        self.start = start
        self.end = end
        self.content_length = content_length
        self._header_list: list[tuple[str, str]] | None = list(header_list or ())
        self._headers: dict[str, str] | None = None
        self._violations: tuple[Violation, ...] | list[Violation] = tuple(violations)
        # (raw header bytes, their stream offset, version, lenient) until decoded
        self._undecoded: tuple[bytes, int, str, bool] | None = None

    def __getstate__(self) -> tuple[None, dict[str, object]]:
        return slot_values(self)

    def __setstate__(self, state: tuple[None, dict[str, object]]) -> None:
        set_slot_values(self, state)

    def _decode(self) -> list[tuple[str, str]]:
        assert self._undecoded is not None
        raw, offset, version, lenient = self._undecoded
        header_list, problems = decode_header_block(raw, offset, version, self.command, lenient)
        if problems:
            found = [Violation(kind, at, detail) for kind, at, detail in problems]
            self._violations = sorted([*self._violations, *found], key=_by_offset)
        self._header_list = header_list
        self._undecoded = None
        return header_list

    @property
    def header_list(self) -> list[tuple[str, str]]:
        header_list = self._header_list
        return self._decode() if header_list is None else header_list

    @property
    def headers(self) -> dict[str, str]:
        headers = self._headers
        if headers is None:
            header_list = self._header_list
            if header_list is None:
                header_list = self._decode()
            headers = dict(header_list)
            if len(headers) < len(header_list):
                for name, value in reversed(header_list):  # repeated names: the first one wins
                    headers[name] = value
            self._headers = headers
        return headers

    def get(self, name: str, default: str | None = None) -> str | None:
        return self.headers.get(name, default)

    @property
    def violations(self) -> tuple[Violation, ...]:
        if self._header_list is None:
            self._decode()
        violations = self._violations
        if type(violations) is not tuple:
            violations = self._violations = tuple(violations)
        return violations

    def _key(self) -> tuple[object, ...]:
        return (
            self.command,
            self.header_list,
            self.body,
            self.start,
            self.end,
            self.content_length,
            self.violations,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Frame):
            return NotImplemented
        return self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        shown = [
            (name, "***" if name.lower() == "passcode" else value)
            for name, value in self.header_list
        ]
        return (
            f"Frame(command={self.command!r}, header_list={shown!r}, "
            f"body={self.body!r}, start={self.start}, end={self.end}, "
            f"content_length={self.content_length}, violations={self.violations!r})"
        )


def undecoded_frame(
    command: str,
    raw_head: bytes,
    raw_offset: int,
    version: str,
    lenient: bool,
    body: bytes,
    start: int,
    end: int,
    content_length: int | None,
    violations: list[Violation] | tuple[Violation, ...] = (),
) -> Frame:
    """A frame whose header lines (``raw_head``: LF-separated, no final EOL, starting at stream
    offset ``raw_offset``) are decoded only when first needed. Built without ``__init__``:
    this is the decoder's per-frame hot path."""
    frame = Frame.__new__(Frame)  # object.__new__ refuses Frame where it is compiled
    frame.command = command
    frame.body = body
    frame.start = start
    frame.end = end
    frame.content_length = content_length
    frame._header_list = None
    frame._headers = None
    frame._violations = violations
    frame._undecoded = (raw_head, raw_offset, version, lenient)
    return frame


_new_object = object.__new__
# the slot descriptors (the class attributes as stored, not as type checkers see them)
_set_offset = vars(HeartBeat)["offset"].__set__
_set_length = vars(HeartBeat)["length"].__set__

# Member descriptors in __slots__ order, for code that builds these objects slot by slot (the
# compiled decoder).
FRAME_SLOTS = tuple(vars(Frame)[name] for name in Frame.__slots__)
HEARTBEAT_SLOTS = tuple(vars(HeartBeat)[name] for name in HeartBeat.__slots__)


def heartbeat(offset: int, length: int = 1) -> HeartBeat:
    """``HeartBeat(offset, length)`` at half the cost: a frozen dataclass's ``__init__`` goes
    through ``object.__setattr__``, and the decoder makes one per EOL."""
    beat = _new_object(HeartBeat)
    _set_offset(beat, offset)
    _set_length(beat, length)
    return beat


def _by_offset(violation: Violation) -> int:
    return violation.offset


Event = Frame | HeartBeat | Violation
