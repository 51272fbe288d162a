"""TCP stream reassembly and connection tracking (sans-IO).

Public API:
    StreamReassembler(isn=None, *, max_pending_bytes=8 MiB, history_bytes=64 KiB)
        .add(seq, payload, ts_ns, *, flags=0, wire_len=None) -> list[Data | Gap | Conflict]
        .flush() -> list[Data | Gap | Conflict]
    ConnectionTracker(*, broker_ports=(), max_pending_bytes=..., history_bytes=...,
                      reuse_after_idle_ns=120 s)
        .add(packet, payload) -> list[Opened | Segment | Closed]; .flush(); .swap_roles()
    canonical_key(packet)
    connection_id(ip_a, port_a, ip_b, port_b, first_ts_ns, opening_seq, ordinal)
"""

from __future__ import annotations

from pipeline.reassembly.connections import (
    Closed,
    Connection,
    ConnectionEvent,
    ConnectionTracker,
    Opened,
    Segment,
    canonical_key,
    connection_id,
)
from pipeline.reassembly.stream import (
    Conflict,
    Data,
    Gap,
    StreamEvent,
    StreamReassembler,
    StreamStats,
)

__all__ = [
    "Closed",
    "Conflict",
    "Connection",
    "ConnectionEvent",
    "ConnectionTracker",
    "Data",
    "Gap",
    "Opened",
    "Segment",
    "StreamEvent",
    "StreamReassembler",
    "StreamStats",
    "canonical_key",
    "connection_id",
]
