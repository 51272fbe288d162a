"""Where a connection's finished rows wait to be drained, with its counters and anomaly rules."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.compiled import set_slot_values, slot_values
from pipeline.session.frame_rows import FrameRows, TableRows, new_frame_rows
from pipeline.session.privacy import scrub
from pipeline.session.rows import anomaly_row
from pipeline.session.streams import Stamp
from schemas import TABLES

if TYPE_CHECKING:
    from pipeline.session.deliveries import UnsettledRows

COUNTED: tuple[str, ...] = (
    "gap_bytes",
    "conflict_bytes",
    "violations",
    "messages_sent",
    "messages_delivered",
    "acks",
    "nacks",
    "errors",
    "receipts_missing",
    "transactions_unfinished",
)  # each is a column of the sessions row


class Outbox:
    __slots__ = (
        "session_id",
        "tables",
        "frames",
        "counts",
        "secrets",
        "last",
        "unsettled",
    )

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.frames: FrameRows = new_frame_rows()  # tables["frames"], as columns
        self.tables: dict[str, TableRows] = {
            name: self.frames if name == "frames" else [] for name in TABLES
        }
        self.counts: dict[str, int] = dict.fromkeys(COUNTED, 0)
        self.secrets: tuple[str, ...] = ()  # passcodes seen, masked wherever text is stored
        self.last: Stamp | None = None  # latest capture time seen, for anomalies without one
        # the MESSAGEs left unsettled when the connection ended: rows for "messages" that the
        # drains take a part of at a time (some may still be on disk)
        self.unsettled: UnsettledRows | None = None

    def __getstate__(self) -> tuple[None, dict[str, object]]:
        return slot_values(self)

    def __setstate__(self, state: tuple[None, dict[str, object]]) -> None:
        self.unsettled = None  # not in the state of an outbox pickled before it was a slot
        set_slot_values(self, state)

    def drain(self, unsettled_limit: int = -1) -> dict[str, TableRows]:
        """The rows made since the last drain, by table; of `unsettled`, at most
        ``unsettled_limit`` (every one when negative), the rest left for the next drains."""
        tables = self.tables
        drained = dict(tables)
        self.frames = type(self.frames)()  # the twin chosen when the model was made
        for name in tables:  # same dict, fresh lists: holders of `tables` stay valid
            tables[name] = self.frames if name == "frames" else []
        unsettled = self.unsettled
        if unsettled is not None:
            drained["messages"].extend(unsettled.take(unsettled_limit))
            if not len(unsettled):
                self.unsettled = None
        return drained

    @property
    def rows_left(self) -> bool:
        """Whether rows of `unsettled` are left for the next drains."""
        return self.unsettled is not None

    def add_secrets(self, secrets: list[str]) -> None:
        self.secrets = tuple(dict.fromkeys((*self.secrets, *secrets)))

    def anomaly(
        self,
        source: str,
        kind: str,
        direction: str | None,
        at: Stamp | None,
        stream_offset: int | None,
        detail: str,
    ) -> None:
        at = at or self.last
        detail = scrub(detail, self.secrets)
        row = anomaly_row(source, kind, self.session_id, direction, at, stream_offset, detail)
        self.tables["anomalies"].append(row)

    def violation(
        self, kind: str, direction: str | None, at: Stamp | None, offset: int | None, detail: str
    ) -> None:
        """A STOMP-level anomaly (counted in the sessions row's ``violations``)."""
        self.counts["violations"] += 1
        self.anomaly("stomp", kind, direction, at, offset, detail)
