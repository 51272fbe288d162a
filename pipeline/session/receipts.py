"""Receipt requests (a ``receipt`` header on a client frame) waiting for their answer."""

from __future__ import annotations

from pipeline.session.rows import Row, receipt_row
from pipeline.session.streams import Stamp


class ReceiptBook:
    __slots__ = ("session_id", "waiting")

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.waiting: dict[str, tuple[str, int, Stamp]] = {}

    def request(self, receipt_id: str, command: str, frame_index: int, at: Stamp) -> bool:
        """False when that receipt id is already waiting (the first request keeps it)."""
        if receipt_id in self.waiting:
            return False
        self.waiting[receipt_id] = (command, frame_index, at)
        return True

    def answer(self, receipt_id: str, outcome: str, at: Stamp) -> tuple[Row, bool | None]:
        """The receipts row for an answer (RECEIPT or ERROR), and whether a request matched:
        None when the only request with that id was sent after the answer (by capture time);
        that request keeps waiting for an answer of its own."""
        request = self.waiting.get(receipt_id)
        if request is None or request[2].ts_ns > at.ts_ns:
            row = receipt_row(self.session_id, receipt_id, None, None, None, at, outcome)
            return row, None if request is not None else False
        del self.waiting[receipt_id]
        command, index, requested = request
        row = receipt_row(self.session_id, receipt_id, command, index, requested, at, outcome)
        return row, True

    def close(self) -> list[Row]:
        """Rows for the requests never answered."""
        rows = [
            receipt_row(self.session_id, receipt_id, command, index, requested, None, "missing")
            for receipt_id, (command, index, requested) in self.waiting.items()
        ]
        self.waiting.clear()
        return rows
