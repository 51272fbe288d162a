"""Transactions: the SENDs and ACK/NACKs bound to them wait here for COMMIT or ABORT.

An ACK/NACK takes effect only when its transaction commits; after ABORT (or when the connection
ends with the transaction still open, which brokers treat as an abort) it acknowledged nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pipeline.session.clock import elapsed_ms
from pipeline.session.rows import Row
from pipeline.session.streams import Stamp

if TYPE_CHECKING:
    from pipeline.session.message_rows import AckRow, MessageRow

COMMITTED = "committed"
ABORTED = "aborted"
UNFINISHED = "unfinished"


@dataclass(slots=True)
class BoundAck:
    """An ACK/NACK inside a transaction, settled when the transaction ends."""

    row: AckRow
    keys: tuple[str | None, ...]
    at: Stamp


@dataclass(slots=True)
class Transaction:
    tx_id: str
    begin_frame_index: int | None
    began: Stamp
    sends: list[MessageRow] = field(default_factory=list)
    acks: list[BoundAck] = field(default_factory=list)
    ack_frames: int = 0
    nack_frames: int = 0
    acked_messages: int = 0

    def row(
        self, session_id: str, outcome: str, end_frame_index: int | None, ended: Stamp | None
    ) -> Row:
        return {
            "session_id": session_id,
            "transaction_id": self.tx_id,
            "begin_frame_index": self.begin_frame_index,
            "began_at": self.began.ts,
            "began_at_ns": self.began.ts_ns,
            "end_frame_index": end_frame_index,
            "ended_at": ended.ts if ended else None,
            "ended_at_ns": ended.ts_ns if ended else None,
            "duration_ms": elapsed_ms(self.began.ts_ns, ended.ts_ns) if ended else None,
            "outcome": outcome,
            "sends": len(self.sends),
            "acks": self.ack_frames,
            "nacks": self.nack_frames,
            "acked_messages": self.acked_messages,
            "date": self.began.date,
        }
