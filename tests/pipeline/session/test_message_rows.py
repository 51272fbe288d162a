from __future__ import annotations

import pickle
from typing import Any

import pyarrow as pa
import pytest

from pipeline.compiled import PURE_PYTHON_VARIABLE
from pipeline.session.clock import to_datetime
from pipeline.session.deliveries import settle_message
from pipeline.session.message_rows import AckRow, MessageRow, SlotRow, row_kinds
from pipeline.session.streams import make_stamp
from pipeline.spark.table_files import row_batch, row_struct

pytest.importorskip("pipeline.session._message_rows")
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


def _kinds() -> list[tuple[type[MessageRow], type[AckRow]]]:
    from pipeline.session.message_rows import CompiledAckRow, CompiledMessageRow

    return [(MessageRow, AckRow), (CompiledMessageRow, CompiledAckRow)]


KINDS = pytest.mark.parametrize("kinds", _kinds(), ids=["reference", "compiled"])


def _messages(kind: type[MessageRow]) -> list[MessageRow]:
    """A MESSAGE settled by ACK, a SEND in an aborted transaction, one never acknowledged, one
    with every optional header missing and a lying content-length."""
    settled = kind.make(
        "s1", "s2c", 3, "MESSAGE", HEADERS, (3, "ab" * 32, "abc", b"abc"), T0, "client"
    )
    settle_message(settled, "ACK", make_stamp(T0 + 2_500_000), 9)
    sent = kind.make(
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
    unsettled = kind.make(
        "s1", "s2c", 5, "MESSAGE", HEADERS, (1, None, None, None), T0 + 2, "client-individual"
    )
    settle_message(unsettled, "none", None, None)
    bare = kind.make(
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


def _acks(kind: type[AckRow]) -> list[AckRow]:
    applied = kind.make(
        "s1", 9, "ACK", {"id": "a-7", "transaction": "t", "receipt": "r"}, "a-7", T0 + 2_500_000
    )
    applied.ack_mode, applied.acked_message_count = "client", 2
    applied.delivered_at_ns, applied.latency_ms = T0, 2.5
    applied.message_id, applied.transaction_outcome = "m-7", "committed"
    unmatched = kind.make("s1", 10, "NACK", {}, None, T0 + 3)
    return [applied, unmatched]


@KINDS
def test_make_splits_standard_and_user_headers(
    kinds: tuple[type[MessageRow], type[AckRow]],
) -> None:
    row = _messages(kinds[0])[0]
    assert (row.destination, row.message_id, row.ack_id, row.content_length) == (
        "/queue/a",
        "m-7",
        "a-7",
        3,
    )
    assert row.user_headers == {"priority": "4", "persistent": "true"}
    assert (row.ack_outcome, row.ack_latency_ms, row.ack_frame_index) == ("ACK", 2.5, 9)
    assert row.acked_at_ns == T0 + 2_500_000
    assert _messages(kinds[0])[3].content_length is None


@KINDS
def test_a_row_reads_as_its_tables_columns(kinds: tuple[type[MessageRow], type[AckRow]]) -> None:
    message, ack = _messages(kinds[0])[0], _acks(kinds[1])[0]
    for row, table in ((message, "messages"), (ack, "acks")):
        assert list(row) == [f.name for f in row_struct(table)]
        assert row["ts"] == to_datetime(row["ts_ns"]) and row["date"] == row["ts"].date()
    assert message["acked_at"] == to_datetime(T0 + 2_500_000)
    assert _messages(kinds[0])[2]["acked_at"] is None
    assert ack["delivered_at"] == to_datetime(T0) and "acked_at" not in ack
    with pytest.raises(KeyError):
        message["ts"] = to_datetime(T0)  # made from ts_ns, never held
    message["ack_mode"] = "client-individual"
    assert message.ack_mode == "client-individual"


def test_the_twins_hold_the_same_rows_and_columns() -> None:
    (python_message, python_ack), (compiled_message, compiled_ack) = _kinds()
    for python_rows, compiled_rows, kind in (
        (_messages(python_message), _messages(compiled_message), compiled_message),
        (_acks(python_ack), _acks(compiled_ack), compiled_ack),
    ):
        assert [dict(r) for r in python_rows] == [dict(r) for r in compiled_rows]
        assert python_rows == compiled_rows  # read as mappings
        assert type(python_rows[0]).columns(python_rows) == kind.columns(compiled_rows)
        assert (
            kind.columns([]) == type(python_rows[0]).columns([]) == tuple([] for _ in kind.FIELDS)
        )


@KINDS
def test_columns_take_only_rows_of_their_kind(kinds: tuple[type[MessageRow], type[AckRow]]) -> None:
    message_kind, ack_kind = kinds
    with pytest.raises(TypeError):
        message_kind.columns([*_messages(message_kind), _acks(ack_kind)[0]])
    with pytest.raises(TypeError):
        ack_kind.columns([{"session_id": "s"}])
    with pytest.raises(ValueError):
        message_kind.make("s", "c2s", 1, "SEND", {}, (1, None, None), T0, None)  # type: ignore[arg-type]


@KINDS
def test_rows_survive_pickling(kinds: tuple[type[MessageRow], type[AckRow]]) -> None:
    for rows in (_messages(kinds[0]), _acks(kinds[1])):
        again = pickle.loads(pickle.dumps(rows, protocol=5))
        assert [type(r) for r in again] == [type(r) for r in rows]
        assert again == rows


@KINDS
def test_the_writer_converts_the_columns_as_it_converts_the_rows_as_dicts(
    kinds: tuple[type[MessageRow], type[AckRow]],
) -> None:
    for table, rows in (("messages", _messages(kinds[0])), ("acks", _acks(kinds[1]))):
        as_dicts: list[Any] = [dict(r) for r in rows]
        assert row_batch(table, rows).equals(row_batch(table, as_dicts)), table
        assert row_batch(table, iter(rows)).equals(row_batch(table, as_dicts)), table
        mixed: list[Any] = [rows[0], as_dicts[1]]  # not all held in slots: converted as dicts
        assert row_batch(table, mixed).equals(row_batch(table, as_dicts[:2])), table


def test_the_rows_twin_is_chosen_when_rows_are_made(monkeypatch: pytest.MonkeyPatch) -> None:
    assert row_kinds() == tuple(_kinds()[1])
    monkeypatch.setenv(PURE_PYTHON_VARIABLE, "1")
    assert row_kinds() == (MessageRow, AckRow)
    assert all(isinstance(r, SlotRow) for r in _messages(MessageRow))


def test_arrow_types_of_the_held_columns() -> None:
    batch = row_batch("messages", _messages(_kinds()[1][0]))
    assert batch.column("user_headers").type == pa.map_(pa.string(), pa.string())
    assert batch.column("ack_latency_ms").to_pylist() == [2.5, None, None, None]


def test_the_compiled_twin_builds_the_arrays_arrow_converts_from_the_columns() -> None:
    """`_message_rows.MessageSlots.arrays`: the held columns built as Arrow's buffers as the rows
    are read, equal to `pyarrow.array` of `columns`."""
    message_kind, ack_kind = _kinds()[1]
    for table, rows in (("messages", _messages(message_kind)), ("acks", _acks(ack_kind))):
        kind: Any = type(rows[0])  # the compiled twin's: typed as the reference
        types = tuple(row_struct(table).field(name).type for name in kind.FIELDS)
        built = kind.arrays(rows, types)
        converted = [pa.array(v, t) for v, t in zip(kind.columns(rows), types, strict=True)]
        assert [a.type for a in built] == list(types)
        assert all(a.equals(b) for a, b in zip(built, converted, strict=True)), table
        with pytest.raises(ValueError):
            kind.arrays(rows, types[:-1])
    messages: Any = message_kind
    with pytest.raises(TypeError):  # an ack among messages
        messages.arrays([_acks(ack_kind)[0]], tuple(pa.string() for _ in MessageRow.FIELDS))
