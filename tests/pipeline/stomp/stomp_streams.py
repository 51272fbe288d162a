"""Helpers for the codec tests: decode whole streams, split streams into chunks."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pipeline.stomp import NEED_DATA, Decoder, Event, Frame, HeartBeat, Violation


def decode(
    data: bytes,
    version: str = "1.2",
    *,
    chunks: Iterable[int] | None = None,
    eof: bool = True,
    **options: Any,
) -> list[Event]:
    """Every event of ``data`` fed whole (or cut at the ``chunks`` sizes), pulled one at a time."""
    decoder = Decoder(version, **options)
    events: list[Event] = []
    for piece in split(data, chunks):
        decoder.feed(piece)
        events.extend(pull(decoder))
    if eof:
        decoder.feed_eof()
        events.extend(pull(decoder))
    return events


def pull(decoder: Decoder) -> list[Event]:
    events: list[Event] = []
    while (event := decoder.next_event()) is not NEED_DATA:
        events.append(event)  # type: ignore[arg-type]
    return events


def split(data: bytes, sizes: Iterable[int] | None) -> list[bytes]:
    if sizes is None:
        return [data]
    pieces, start = [], 0
    for size in sizes:
        if start >= len(data):
            break
        pieces.append(data[start : start + size])
        start += size
    if start < len(data):
        pieces.append(data[start:])
    return pieces


def frames(events: Sequence[Event]) -> list[Frame]:
    return [event for event in events if isinstance(event, Frame)]


def beats(events: Sequence[Event]) -> list[HeartBeat]:
    return [event for event in events if isinstance(event, HeartBeat)]


def stream_violations(events: Sequence[Event]) -> list[Violation]:
    return [event for event in events if isinstance(event, Violation)]


def kinds(events: Sequence[Event]) -> list[str]:
    """Violation kinds in order: stream events and those inside frames."""
    found: list[str] = []
    for event in events:
        if isinstance(event, Violation):
            found.append(event.kind)
        elif isinstance(event, Frame):
            found.extend(violation.kind for violation in event.violations)
    return found


def only_frame(data: bytes, version: str = "1.2", **options: Any) -> Frame:
    events = decode(data, version, **options)
    found = frames(events)
    assert len(found) == 1, events
    return found[0]
