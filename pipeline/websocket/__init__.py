"""STOMP over WebSocket (RFC 6455, RFC 7692), sans-IO.

Public API:
    Transport(*, mid_stream=False)
        .receive(direction, ts_ns, tcp_offset, data) -> list[Event]
        .receive_gap(direction, ts_ns, tcp_offset, size) -> list[Event]
        .receive_eof(direction, ts_ns) -> list[Event]
        .finish(ts_ns) -> list[Event]
    Events (pipeline.websocket.events): StompData, StompGap, Control, Violation, HandshakeSeen,
    NotWebSocket. ``apply(model, events, source)`` hands them to a SessionModel.
    Violation kinds: pipeline.websocket.violations.
"""

from __future__ import annotations

from pipeline.websocket.events import (
    Control,
    Event,
    HandshakeSeen,
    NotWebSocket,
    StompData,
    StompGap,
    Violation,
)
from pipeline.websocket.session import apply
from pipeline.websocket.transport import Transport

__all__ = [
    "Control",
    "Event",
    "HandshakeSeen",
    "NotWebSocket",
    "StompData",
    "StompGap",
    "Transport",
    "Violation",
    "apply",
]
