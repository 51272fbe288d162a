"""Sans-IO STOMP codec: an incremental decoder that emits offset-stamped events, and an encoder."""

from __future__ import annotations

from pipeline.stomp.commands import (
    ALL_COMMANDS,
    BODY_COMMANDS,
    CLIENT_COMMANDS,
    NO_BODY_COMMANDS,
    SERVER_COMMANDS,
    VERSIONS,
)
from pipeline.stomp.decoder import NEED_DATA, Decoder, Limits
from pipeline.stomp.encoder import encode_frame, encode_heartbeat
from pipeline.stomp.events import Event, Frame, HeartBeat, Violation

__all__ = [
    "ALL_COMMANDS",
    "BODY_COMMANDS",
    "CLIENT_COMMANDS",
    "NEED_DATA",
    "NO_BODY_COMMANDS",
    "SERVER_COMMANDS",
    "VERSIONS",
    "Decoder",
    "Event",
    "Frame",
    "HeartBeat",
    "Limits",
    "Violation",
    "encode_frame",
    "encode_heartbeat",
]
