from __future__ import annotations

import pickle
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pytest

from pipeline.net import Direction
from pipeline.session import message_rows
from pipeline.session.clock import to_datetime
from pipeline.session.deliveries import settle_message
from pipeline.session.message_rows import (
    AckRow,
    MessageRow,
    SlotRow,
    ack_row,
    message_row,
    parse_length,
    user_headers,
)
from pipeline.session.streams import make_stamp
from pipeline.spark.arrow_rows import row_batch, row_struct, slot_batch

T0 = 1_700_000_000_123_456_789
HEADERS = {
    "destination": "/queue/a",
    "message-id": "m-7",
    "subscription": "0",
    "ack": "a-7",
    "content-type": "text/plain",
    "content-length": "3",
    "receipt": "r-1",
    "priority": "4",
    "persistent": "true",
}


def _messages() -> list[MessageRow]:
    """A MESSAGE settled by ACK, a SEND in an aborted transaction, one never acknowledged, one
    with every optional header missing and a lying content-length."""
    settled = message_row(
        "s1", "s2c", 3, "MESSAGE", HEADERS, (3, "ab" * 32, "abc", b"abc"), T0, "client"
    )
    settle_message(settled, "ACK", make_stamp(T0 + 2_500_000), 9)
    sent = message_row(
        "s1",
        "c2s",
        4,
        "SEND",
        {"destination": "/q", "transaction": "t"},
        (0, None, None, None),
        T0 + 1,
        None,
    )
    sent.transaction_outcome = "aborted"
    unsettled = message_row(
        "s1", "s2c", 5, "MESSAGE", HEADERS, (1, None, None, None), T0 + 2, "client-individual"
    )
    settle_message(unsettled, "none", None, None)
    bare = message_row(
        "s2",
        "s2c",
        6,
        "MESSAGE",
        {"content-length": "-4"},
        (0, None, None, b""),
        T0 - 86_400 * 10**9,
        None,
    )
    return [settled, sent, unsettled, bare]


def _acks() -> list[AckRow]:
    applied = ack_row(
        "s1", 9, "ACK", {"id": "a-7", "transaction": "t", "receipt": "r"}, "a-7", T0 + 2_500_000
    )
    applied.ack_mode, applied.acked_message_count = "client", 2
    applied.delivered_at_ns, applied.latency_ms = T0, 2.5
    applied.message_id, applied.transaction_outcome = "m-7", "committed"
    unmatched = ack_row("s1", 10, "NACK", {}, None, T0 + 3)
    return [applied, unmatched]


def test_make_splits_standard_and_user_headers() -> None:
    row = _messages()[0]
    assert (row.destination, row.message_id, row.ack_id, row.content_length) == (
        "/queue/a",
        "m-7",
        "a-7",
        3,
    )
    assert row.user_headers == {"priority": "4", "persistent": "true"}
    assert (row.ack_outcome, row.ack_latency_ms, row.ack_frame_index) == ("ACK", 2.5, 9)
    assert row.acked_at_ns == T0 + 2_500_000
    assert _messages()[3].content_length is None


@pytest.mark.parametrize(("value", "length"), [("12", 12), (None, None), ("x", None), ("-1", None)])
def test_parse_length(value: str | None, length: int | None) -> None:
    assert parse_length(value) == length


def test_user_headers_are_the_others_in_their_order() -> None:
    headers = {"x-b": "1", "destination": "/queue/a", "x-a": "2", "receipt": "r", "ack": "a"}
    assert list(user_headers(headers).items()) == [("x-b", "1"), ("x-a", "2")]
    assert user_headers({}) == {} and user_headers(HEADERS) is not HEADERS


def test_a_row_reads_as_its_tables_columns() -> None:
    message, ack = _messages()[0], _acks()[0]
    for row, table in ((message, "messages"), (ack, "acks")):
        assert list(row) == [f.name for f in row_struct(table)]
        assert row["ts"] == to_datetime(row["ts_ns"]) and row["date"] == row["ts"].date()
    assert message["acked_at"] == to_datetime(T0 + 2_500_000)
    assert _messages()[2]["acked_at"] is None
    assert ack["delivered_at"] == to_datetime(T0) and "acked_at" not in ack
    with pytest.raises(KeyError):
        message["ts"] = to_datetime(T0)  # made from ts_ns, never held
    message["ack_mode"] = "client-individual"
    assert message.ack_mode == "client-individual"


def test_columns_are_the_held_values_in_the_order_of_the_fields() -> None:
    for rows in (_messages(), _acks()):
        kind = type(rows[0])
        for row in rows:
            assert row.held() == tuple(getattr(row, name) for name in kind.FIELDS)
        assert kind.columns(rows) == tuple(
            [getattr(row, name) for row in rows] for name in kind.FIELDS
        )
        assert kind.columns([]) == tuple([] for _ in kind.FIELDS)


def test_a_row_is_a_mapping_equal_to_its_dict() -> None:
    row = _messages()[0]
    assert isinstance(row, Mapping) and isinstance(row, SlotRow)
    assert row == dict(row) and dict(row) == row and row != {**dict(row), "body": b"?"}
    assert "destination" in row and "acked_at" in row and "batch_id" not in row
    assert row.get("destination") == "/queue/a" and row.get("nothing", 5) == 5
    assert list(row.keys()) == list(row) and list(row.values()) == [row[k] for k in row]


def test_columns_take_only_rows_of_their_kind() -> None:
    with pytest.raises(TypeError):
        MessageRow.columns([*_messages(), _acks()[0]])
    with pytest.raises(TypeError):
        AckRow.columns([{"session_id": "s"}])
    with pytest.raises(ValueError):
        message_row("s", "c2s", 1, "SEND", {}, (1, None, None), T0, None)  # type: ignore[arg-type]


def test_rows_survive_pickling() -> None:
    for rows in (_messages(), _acks()):
        again = pickle.loads(pickle.dumps(rows, protocol=5))
        assert [type(r) for r in again] == [type(r) for r in rows]
        assert again == rows


def test_a_pickled_row_holds_its_direction_as_text_and_gets_the_member_back() -> None:
    row = message_row("s1", Direction.S2C, 3, "MESSAGE", HEADERS, (3, None, None, None), T0, None)
    data = pickle.dumps(row, protocol=5)
    assert b"Direction" not in data and b"pipeline.net" not in data
    assert pickle.loads(data).direction is Direction.S2C and pickle.loads(data) == row
    # as a row pickled with the member (an earlier release's carried state) is read back
    again = message_rows._remade(MessageRow, row.held())  # noqa: SLF001
    assert isinstance(again, MessageRow) and again.direction is Direction.S2C and again == row


def test_the_writer_converts_the_columns_as_it_converts_the_rows_as_dicts() -> None:
    for table, rows in (("messages", _messages()), ("acks", _acks())):
        as_dicts: list[Any] = [dict(r) for r in rows]
        assert row_batch(table, rows).equals(row_batch(table, as_dicts)), table
        assert row_batch(table, iter(rows)).equals(row_batch(table, as_dicts)), table
        mixed: list[Any] = [rows[0], as_dicts[1]]  # not all held in slots: converted as dicts
        assert row_batch(table, mixed).equals(row_batch(table, as_dicts[:2])), table


def test_arrow_types_of_the_held_columns() -> None:
    batch = row_batch("messages", _messages())
    assert batch.column("user_headers").type == pa.map_(pa.string(), pa.string())
    assert batch.column("ack_latency_ms").to_pylist() == [2.5, None, None, None]


def test_the_writer_builds_the_arrays_arrow_converts_from_the_columns() -> None:
    """`arrow_rows.slot_batch`: each held column built (by `_arrow_columns` where it is built)
    equal to `pyarrow.array` of the column."""
    for kind, rows in ((MessageRow, _messages()), (AckRow, _acks())):
        struct = row_struct(kind.TABLE)
        batch = slot_batch(kind, rows)  # type: ignore[arg-type]
        for name, values in zip(kind.FIELDS, kind.columns(rows), strict=True):
            if name in batch.schema.names:
                assert batch.column(name).equals(pa.array(values, struct.field(name).type))
