"""The messages and acks tables' rows as objects with a slot per column they hold.

A MESSAGE's row is made when its frame is decoded and filled in when it is settled (ACK, NACK,
the end of the connection) or its transaction ends; an ACK's row when the ACK is applied. A row
is built slot by slot, not key by key as a dict, and the writer takes each column out of a
table's rows at once (`columns`) and converts it whole, as it does the frames'
(`pipeline.spark.arrow_rows`). Compiled from this source (`pipeline.compiled.SOURCE_MODULES`,
``message_rows.pxd``), the slots are C fields.

The timestamp columns (``ts``, ``acked_at``, ``delivered_at``) and ``date`` are not held: they
are made from their ``_ns`` twins, by the writer as Arrow arrays and, read by name, as datetimes.
Read by name, a row is a mapping of its table's columns but ``batch_id``, as the other tables'
dict rows are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import schemas
from pipeline.net import Direction
from pipeline.session.clock import to_datetime
from pipeline.session.rows import DATE_COLUMN, NS_SUFFIX, Body

# Headers with their own messages column; every other header is a "user header".
MESSAGE_HEADERS: frozenset[str] = frozenset(
    {
        "destination",
        "message-id",
        "subscription",
        "ack",
        "transaction",
        "content-type",
        "content-length",
        "receipt",
    }
)


def user_headers(headers: dict[str, str]) -> dict[str, str]:
    """The headers without those with a column of their own, in their order (a copy less the
    standard names: a third faster than choosing header by header)."""
    user = headers.copy()
    for name in _MESSAGE_HEADER_NAMES:
        user.pop(name, None)  # on a dict typed as such (message_rows.pxd): a C call
    return user


_MESSAGE_HEADER_NAMES = tuple(MESSAGE_HEADERS)


def parse_length(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        length = int(value)
    except ValueError:
        return None
    return length if length >= 0 else None


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


def _columns_of(table: str) -> tuple[str, ...]:
    return tuple(f.name for f in schemas.load(table).arrow_schema() if f.name != "batch_id")


class SlotRow(Mapping[str, Any]):
    """What the rows held in slots share: read by column name, as a mapping of the table's
    columns but batch_id. A kind of row derives from this and from the class of its fields
    (`MessageFields`, `AckFields`), which are C fields where compiled."""

    __slots__ = ()
    TABLE: ClassVar[str]
    FIELDS: ClassVar[tuple[str, ...]]  # held, in the order `held` and `columns` give them
    COLUMNS: ClassVar[tuple[str, ...]]  # the table's columns but batch_id, in its order

    ts_ns: int  # held by every kind: ``ts`` and the date are made from it

    if TYPE_CHECKING:  # the fields' class's, not one shadowing it

        def held(self) -> tuple[Any, ...]: ...

        def fill(self, held: tuple[Any, ...]) -> None: ...

    @classmethod
    def columns(cls, rows: list[Any]) -> tuple[list[Any], ...]:
        """The held columns of ``rows``, all of this kind, in the order of `FIELDS`."""
        for row in rows:
            if type(row) is not cls:
                raise TypeError(f"a {cls.__name__} was expected, not {type(row).__name__}")
        if not rows:
            return tuple([] for _ in cls.FIELDS)
        return tuple(list(column) for column in zip(*[row.held() for row in rows], strict=True))

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

    def __reduce__(self) -> tuple[Callable[..., SlotRow], tuple[Any, ...]]:
        """Pickled as its kind and held values, compiled or not alike; a direction as its text:
        an enum member took 4x as long to pickle and read back as the row's other values
        together (a spilled MESSAGE's row is both, `pipeline.session.spilled`)."""
        held = [str(value) if type(value) is Direction else value for value in self.held()]
        return _remade, (type(self), tuple(held))


_DIRECTIONS: dict[object, Direction] = {str(member): member for member in Direction}


def _remade(kind: type[SlotRow], held: tuple[Any, ...]) -> SlotRow:
    row = kind.__new__(kind)
    row.fill(held)
    return row


class MessageFields:
    """A messages row's held columns."""

    __slots__ = MESSAGE_FIELDS

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

    def held(self) -> tuple[Any, ...]:
        """The held values, in the order of the table's fields."""
        return (
            self.session_id,
            self.direction,
            self.frame_index,
            self.ts_ns,
            self.command,
            self.destination,
            self.message_id,
            self.subscription,
            self.ack_id,
            self.transaction,
            self.transaction_outcome,
            self.content_type,
            self.content_length,
            self.body_length,
            self.body_sha256,
            self.body_preview,
            self.body,
            self.receipt,
            self.user_headers,
            self.ack_mode,
            self.ack_outcome,
            self.acked_at_ns,
            self.ack_latency_ms,
            self.ack_frame_index,
        )

    def fill(self, held: tuple[Any, ...]) -> None:
        """The held values set from `held`'s tuple, a direction from its text too (as a row is
        pickled; one pickled by an earlier release holds the member). Each field by name, as
        `held` reads them: compiled, a C store each, where ``setattr`` by name took 2.4 us a
        row."""
        (
            self.session_id,
            direction,
            self.frame_index,
            self.ts_ns,
            self.command,
            self.destination,
            self.message_id,
            self.subscription,
            self.ack_id,
            self.transaction,
            self.transaction_outcome,
            self.content_type,
            self.content_length,
            self.body_length,
            self.body_sha256,
            self.body_preview,
            self.body,
            self.receipt,
            self.user_headers,
            self.ack_mode,
            self.ack_outcome,
            self.acked_at_ns,
            self.ack_latency_ms,
            self.ack_frame_index,
        ) = held
        self.direction = _DIRECTIONS.get(direction, direction)


class AckFields:
    """An acks row's held columns."""

    __slots__ = ACK_FIELDS

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

    def held(self) -> tuple[Any, ...]:
        """The held values, in the order of the table's fields."""
        return (
            self.session_id,
            self.frame_index,
            self.ts_ns,
            self.command,
            self.ack_id,
            self.message_id,
            self.subscription,
            self.ack_mode,
            self.transaction,
            self.transaction_outcome,
            self.acked_message_count,
            self.delivered_at_ns,
            self.latency_ms,
            self.receipt,
        )

    def fill(self, held: tuple[Any, ...]) -> None:
        """The held values set from `held`'s tuple."""
        (
            self.session_id,
            self.frame_index,
            self.ts_ns,
            self.command,
            self.ack_id,
            self.message_id,
            self.subscription,
            self.ack_mode,
            self.transaction,
            self.transaction_outcome,
            self.acked_message_count,
            self.delivered_at_ns,
            self.latency_ms,
            self.receipt,
        ) = held


class MessageRow(SlotRow, MessageFields):
    """A messages row."""

    __slots__ = ()
    TABLE = "messages"
    FIELDS = MESSAGE_FIELDS
    COLUMNS = _columns_of("messages")


class AckRow(SlotRow, AckFields):
    """An acks row."""

    __slots__ = ()
    TABLE = "acks"
    FIELDS = ACK_FIELDS
    COLUMNS = _columns_of("acks")


def message_row(
    session_id: str,
    direction: str,
    frame_index: int,
    command: str,
    headers: dict[str, str],
    body: Body,
    ts_ns: int,
    ack_mode: str | None,
) -> MessageRow:
    """The messages row of a MESSAGE or SEND frame, as far as its frame tells."""
    row = MessageFields.__new__(MessageRow)  # compiled: its fields stored in C
    row.session_id = session_id
    row.direction = direction
    row.frame_index = frame_index
    row.ts_ns = ts_ns
    row.command = command
    row.destination = headers.get("destination")
    row.message_id = headers.get("message-id")
    row.subscription = headers.get("subscription")
    row.ack_id = headers.get("ack")
    row.transaction = headers.get("transaction")
    row.transaction_outcome = None
    row.content_type = headers.get("content-type")
    row.content_length = parse_length(headers.get("content-length"))
    row.body_length, row.body_sha256, row.body_preview, row.body = body
    row.receipt = headers.get("receipt")
    row.user_headers = user_headers(headers)
    row.ack_mode = ack_mode
    row.ack_outcome = None
    row.acked_at_ns = None
    row.ack_latency_ms = None
    row.ack_frame_index = None
    return row


def ack_row(
    session_id: str,
    frame_index: int,
    command: str,
    headers: dict[str, str],
    ack_id: str | None,
    ts_ns: int,
) -> AckRow:
    """The acks row of an ACK or NACK frame, as far as its frame tells."""
    row = AckFields.__new__(AckRow)
    row.session_id = session_id
    row.frame_index = frame_index
    row.ts_ns = ts_ns
    row.command = command
    row.ack_id = ack_id
    row.message_id = headers.get("message-id")
    row.subscription = headers.get("subscription")
    row.ack_mode = None
    row.transaction = headers.get("transaction")
    row.transaction_outcome = None
    row.acked_message_count = 0
    row.delivered_at_ns = None
    row.latency_ms = None
    row.receipt = headers.get("receipt")
    return row
