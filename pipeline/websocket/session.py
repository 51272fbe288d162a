"""Hand the transport's events to a SessionModel: the one place the two meet."""

from __future__ import annotations

from collections.abc import Iterable

from pipeline.session import SessionModel
from pipeline.websocket.events import (
    Control,
    Event,
    HandshakeSeen,
    StompData,
    StompGap,
    Violation,
)


def apply(
    model: SessionModel, events: Iterable[Event], source: tuple[str, int] | None = None
) -> None:
    """``source``: (file, record offset) of the packet whose bytes produced the events."""
    for event in events:
        kind = type(event)
        if kind is StompData:
            model.on_data(
                event.direction,  # type: ignore[union-attr]
                event.ts_ns,
                event.stomp_offset,  # type: ignore[union-attr]
                event.data,  # type: ignore[union-attr]
                source,
                tcp_offset=event.tcp_offset,  # type: ignore[union-attr]
                whole_message=event.whole_message,  # type: ignore[union-attr]
                tcp_frames=event.frames,  # type: ignore[union-attr]
            )
        elif kind is StompGap:
            model.on_gap(event.direction, event.ts_ns, event.stomp_offset, event.size, source)  # type: ignore[union-attr]
        elif kind is Control:
            model.on_websocket_control(event, source)  # type: ignore[arg-type]
        elif kind is Violation:
            model.on_websocket_violation(event, source)  # type: ignore[arg-type]
        elif kind is HandshakeSeen:
            model.on_websocket_handshake(event)  # type: ignore[arg-type]
        # NotWebSocket: nothing to record, the connection stays transport 'tcp'
