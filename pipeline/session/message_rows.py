"""The messages and acks tables' rows as objects with a slot per column they hold.

A MESSAGE's row is made when its frame is decoded and filled in when it is settled (ACK, NACK,
the end of the connection) or its transaction ends; an ACK's row when the ACK is applied. As
dicts they were built key by key and converted to Arrow a row at a time: one task's share of
2.26 GB spent 0.62 of its 6.4 s converting them. As objects they are built slot by slot, and
the writer takes each column out of a table's rows at once (`columns`) and converts it whole, as
it does the frames' lists (`pipeline.spark.table_files.slot_batch`). ``_message_rows.pyx`` is
the compiled twin of the slots and of `make` and `columns`.

The timestamp columns (``ts``, ``acked_at``, ``delivered_at``) and ``date`` are not held: they
are made from their ``_ns`` twins, by the writer as Arrow arrays and, read by name, as datetimes.
Read by name, a row is a mapping of its table's columns but ``batch_id``, as the other tables'
dict rows are.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from operator import attrgetter
from typing import TYPE_CHECKING, Any, ClassVar

import schemas
from pipeline.compiled import built, kernel
from pipeline.session.clock import to_datetime
from pipeline.session.rows import DATE_COLUMN, NS_SUFFIX, Body, parse_length, user_headers

MESSAGE_FIELDS: tuple[str, ...] = (
    "session_id",
    "direction",
    "frame_index",
    "ts_ns",
    "command",
    "destination",
    "message_id",
    "subscription",
    "ack_id",
    "transaction",
    "transaction_outcome",
    "content_type",
    "content_length",
    "body_length",
    "body_sha256",
    "body_preview",
    "body",
    "receipt",
    "user_headers",
    "ack_mode",
    "ack_outcome",
    "acked_at_ns",
    "ack_latency_ms",
    "ack_frame_index",
)
ACK_FIELDS: tuple[str, ...] = (
    "session_id",
    "frame_index",
    "ts_ns",
    "command",
    "ack_id",
    "message_id",
    "subscription",
    "ack_mode",
    "transaction",
    "transaction_outcome",
    "acked_message_count",
    "delivered_at_ns",
    "latency_ms",
    "receipt",
)


class SlotRow(Mapping[str, Any]):
    """What the two twins of a table's row share: the row read by column name."""

    __slots__ = ()
    TABLE: ClassVar[str]
    FIELDS: ClassVar[tuple[str, ...]]  # held, in the order `columns` gives them
    COLUMNS: ClassVar[tuple[str, ...]]  # the table's columns but batch_id, in its order

    if TYPE_CHECKING:  # each twin's own, not one shadowing the compiled twin's

        @staticmethod
        def columns(rows: list[Any]) -> tuple[list[Any], ...]:
            """The held columns of ``rows``, all of this kind, in the order of `FIELDS`."""

    ts_ns: int  # held by every kind: ``ts`` and the date are made from it

    def __getitem__(self, name: str) -> Any:
        """A held column, or a timestamp made from its held ``_ns`` twin, or the date."""
        if name in self.FIELDS:
            return getattr(self, name)
        if name == DATE_COLUMN:
            return to_datetime(self.ts_ns).date()
        twin = f"{name}{NS_SUFFIX}"
        if twin not in self.FIELDS:
            raise KeyError(name)
        ns = getattr(self, twin)
        return None if ns is None else to_datetime(ns)

    def __setitem__(self, name: str, value: Any) -> None:
        if name not in self.FIELDS:
            raise KeyError(f"{name!r} is not held by a {self.TABLE} row")
        setattr(self, name, value)

    def __iter__(self) -> Iterator[str]:
        return iter(self.COLUMNS)

    def __len__(self) -> int:
        return len(self.COLUMNS)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict(self)!r})"


def _columns_of(table: str) -> tuple[str, ...]:
    return tuple(f.name for f in schemas.load(table).arrow_schema() if f.name != "batch_id")


class MessageRow(SlotRow):
    """The reference: a messages row in a slotted Python object."""

    __slots__ = MESSAGE_FIELDS
    TABLE = "messages"
    FIELDS = MESSAGE_FIELDS

    session_id: str
    direction: str
    frame_index: int
    ts_ns: int
    command: str
    destination: str | None
    message_id: str | None
    subscription: str | None
    ack_id: str | None
    transaction: str | None
    transaction_outcome: str | None
    content_type: str | None
    content_length: int | None
    body_length: int
    body_sha256: str | None
    body_preview: str | None
    body: bytes | None
    receipt: str | None
    user_headers: dict[str, str]
    ack_mode: str | None
    ack_outcome: str | None
    acked_at_ns: int | None
    ack_latency_ms: float | None
    ack_frame_index: int | None

    @classmethod
    def make(
        cls,
        session_id: str,
        direction: str,
        frame_index: int,
        command: str,
        headers: dict[str, str],
        body: Body,
        ts_ns: int,
        ack_mode: str | None,
    ) -> MessageRow:
        get = headers.get
        row = cls.__new__(cls)
        row.session_id = session_id
        row.direction = direction
        row.frame_index = frame_index
        row.ts_ns = ts_ns
        row.command = command
        row.destination = get("destination")
        row.message_id = get("message-id")
        row.subscription = get("subscription")
        row.ack_id = get("ack")
        row.transaction = get("transaction")
        row.transaction_outcome = None
        row.content_type = get("content-type")
        row.content_length = parse_length(get("content-length"))
        row.body_length, row.body_sha256, row.body_preview, row.body = body
        row.receipt = get("receipt")
        row.user_headers = user_headers(headers)
        row.ack_mode = ack_mode
        row.ack_outcome = None
        row.acked_at_ns = None
        row.ack_latency_ms = None
        row.ack_frame_index = None
        return row

    @staticmethod
    def columns(rows: list[Any]) -> tuple[list[Any], ...]:
        return _held_columns(rows, MessageRow)


class AckRow(SlotRow):
    """The reference: an acks row in a slotted Python object."""

    __slots__ = ACK_FIELDS
    TABLE = "acks"
    FIELDS = ACK_FIELDS

    session_id: str
    frame_index: int
    ts_ns: int
    command: str
    ack_id: str | None
    message_id: str | None
    subscription: str | None
    ack_mode: str | None
    transaction: str | None
    transaction_outcome: str | None
    acked_message_count: int
    delivered_at_ns: int | None
    latency_ms: float | None
    receipt: str | None

    @classmethod
    def make(
        cls,
        session_id: str,
        frame_index: int,
        command: str,
        headers: dict[str, str],
        ack_id: str | None,
        ts_ns: int,
    ) -> AckRow:
        get = headers.get
        row = cls.__new__(cls)
        row.session_id = session_id
        row.frame_index = frame_index
        row.ts_ns = ts_ns
        row.command = command
        row.ack_id = ack_id
        row.message_id = get("message-id")
        row.subscription = get("subscription")
        row.ack_mode = None
        row.transaction = get("transaction")
        row.transaction_outcome = None
        row.acked_message_count = 0
        row.delivered_at_ns = None
        row.latency_ms = None
        row.receipt = get("receipt")
        return row

    @staticmethod
    def columns(rows: list[Any]) -> tuple[list[Any], ...]:
        return _held_columns(rows, AckRow)


def _held_columns(rows: list[Any], kind: type[SlotRow]) -> tuple[list[Any], ...]:
    for row in rows:
        if not isinstance(row, kind):
            raise TypeError(f"a {kind.__name__} was expected, not {type(row).__name__}")
    if not rows:
        return tuple([] for _ in kind.FIELDS)
    values = map(attrgetter(*kind.FIELDS), rows)
    return tuple(list(column) for column in zip(*values, strict=True))


MessageRow.COLUMNS = _columns_of("messages")
AckRow.COLUMNS = _columns_of("acks")

_compiled = built("message_rows")

if TYPE_CHECKING:  # the twins are typed as the reference
    CompiledMessageRow = MessageRow
    CompiledAckRow = AckRow
elif _compiled is not None:

    class CompiledMessageRow(SlotRow, _compiled.MessageSlots):
        __slots__ = ()
        TABLE = "messages"
        FIELDS = MESSAGE_FIELDS
        COLUMNS = MessageRow.COLUMNS

    class CompiledAckRow(SlotRow, _compiled.AckSlots):
        __slots__ = ()
        TABLE = "acks"
        FIELDS = ACK_FIELDS
        COLUMNS = AckRow.COLUMNS


def row_kinds() -> tuple[type[MessageRow], type[AckRow]]:
    """The messages and acks rows of the compiled twin, or of the reference (not built, or pure
    Python asked for when the rows' maker is chosen)."""
    if _compiled is not None and kernel("message_rows") is not None:
        return CompiledMessageRow, CompiledAckRow
    return MessageRow, AckRow
