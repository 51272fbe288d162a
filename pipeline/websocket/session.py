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
        # data first: the common case costs one type() as before, the rarer kinds one more each
        if type(event) is StompData:
            model.on_data(
                event.direction,
                event.ts_ns,
                event.stomp_offset,
                event.data,
                source,
                tcp_offset=event.tcp_offset,
                whole_message=event.whole_message,
                tcp_frames=event.frames,
            )
        elif type(event) is StompGap:
            model.on_gap(event.direction, event.ts_ns, event.stomp_offset, event.size, source)
        elif type(event) is Control:
            model.on_websocket_control(event, source)
        elif type(event) is Violation:
            model.on_websocket_violation(event, source)
        elif type(event) is HandshakeSeen:
            model.on_websocket_handshake(event)
        # NotWebSocket: nothing to record, the connection stays transport 'tcp'
