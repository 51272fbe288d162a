from __future__ import annotations

import pickle
from typing import Any

import pyarrow as pa
import pytest

from pipeline.compiled import PURE_PYTHON_VARIABLE
from pipeline.session.clock import to_datetime
from pipeline.session.frame_rows import (
    FRAME_COLUMNS,
    FrameRows,
    PythonFrameRows,
    headers_follow_list,
    new_frame_rows,
)
from pipeline.session.options import ModelOptions
from pipeline.spark.arrow_rows import frame_batch, row_struct
from tests.pipeline.session.conversation import Conversation

compiled = pytest.importorskip("pipeline.session._frame_rows")
columns = pytest.importorskip("pipeline.session._arrow_columns")
T0 = 1_700_000_000_000_000_000

# (headers, header_list): the writer may make the map from the list only where they agree
ENTRIES: list[tuple[Any, Any, bool]] = [
    ({"a": "1", "b": "2"}, [("a", "1"), ("b", "2")], True),
    ({}, [], True),
    ({"a": "1"}, [("a", "1"), ("a", "2")], False),  # a repeated name: the first is the header
    ({"b": "2", "a": "1"}, [("a", "1"), ("b", "2")], False),  # another order
    ({"a": "1"}, [("a", "x")], False),
    ({"a": "1"}, [["a", "1"]], False),  # lists, not tuples
    ({"a": "1"}, [("a", "1", "?")], False),
    ({"a": "1"}, None, False),  # rows given as dicts may hold anything
    (None, [("a", "1")], False),
    # refused after pairs were added: the list's second value, then the map's alone
    ({"a": "1", "b": 2}, [("a", "1"), ("b", 2)], True),
    ({"a": "1", "b": 2}, [("a", "1"), ("b", "2")], False),
]


def _both() -> list[FrameRows]:
    from pipeline.session.frame_rows import CompiledFrameRows

    return [PythonFrameRows(), CompiledFrameRows()]


def _add(rows: FrameRows, n: int, headers: dict[str, str], header_list: Any) -> None:
    body = (3, "ab" * 32, "abc", b"abc") if n % 2 else (0, None, None, None)
    rows.add(
        "s1",
        "c2s",
        n,
        T0 + n,
        T0 + n + 5,
        "SEND",
        headers,
        header_list,
        3 if n % 2 else None,
        body,
        100 * n,
        40,
        100 * n + 2,
        "bad" if n == 3 else None,
    )


@pytest.mark.parametrize(("headers", "header_list", "follows"), ENTRIES)
def test_the_twins_agree_on_which_headers_follow_their_list(
    headers: dict[str, str], header_list: Any, follows: bool
) -> None:
    assert headers_follow_list(headers, header_list) is follows
    for rows in _both():
        _add(rows, 1, {"x": "1"}, [("x", "1")])
        assert rows.regular
        _add(rows, 2, headers, header_list)
        assert rows.regular is follows, type(rows).__name__


def test_the_twins_hold_the_same_columns_and_rows() -> None:
    python, built = _both()
    for rows in (python, built):
        for n, (headers, header_list, _) in enumerate(ENTRIES[:3]):
            _add(rows, n, headers, header_list)
    assert [list(c) for c in python.columns] == [list(c) for c in built.columns]
    assert len(python) == len(built) == 3
    assert list(python) == list(built) and python == built
    row = python[1]
    assert list(row) == [
        *("session_id", "direction", "frame_index", "ts", "ts_ns", "ts_end", "ts_end_ns"),
        *FRAME_COLUMNS[5:],
        "date",
    ]
    assert row["ts"] == to_datetime(T0 + 1) and row["date"] == to_datetime(T0 + 1).date()
    assert (row["body_length"], row["body_sha256"], row["tcp_offset"]) == (3, "ab" * 32, 102)


def test_the_compiled_twin_holds_its_integer_columns_as_int64_arrays() -> None:
    """Arrow takes them whole (`arrow_rows._held_array`); a value no int64 holds raises before
    any column grows."""
    python, built = _both()
    for rows in (python, built):
        _add(rows, 0, {"a": "1"}, [("a", "1")])
    for name in compiled.INT64_COLUMNS:
        held: Any = built.column(name)  # typed as the reference's list
        assert held.typecode == "q" and list(held) == python.column(name)
    with pytest.raises(OverflowError):
        built.add(
            "s1", "c2s", 2**63, 0, 0, "SEND", {}, [], None, (0, None, None, None), 0, 0, 0, None
        )
    assert {len(column) for column in built.columns} == {1}


def test_rows_added_as_dicts_or_as_rows_join_the_columns() -> None:
    python, built = _both()
    _add(python, 0, {"a": "1"}, [("a", "1")])
    built.extend(list(python))  # as dicts
    assert built == python and built.regular
    _add(built, 1, {"a": "1"}, [("a", "1"), ("a", "2")])
    python.extend(built)  # as columns: the irregular frame comes along
    assert len(python) == 3 and not python.regular
    assert python.column("frame_index") == [0, 0, 1]


@pytest.mark.parametrize("pure", [False, True])
def test_new_rows_follow_the_pure_python_switch(
    pure: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if pure:
        monkeypatch.setenv(PURE_PYTHON_VARIABLE, "1")
    rows = new_frame_rows()
    assert isinstance(rows, PythonFrameRows) is pure


def test_both_twins_pickle() -> None:
    for rows in _both():
        _add(rows, 1, {"a": "1"}, [("a", "1"), ("a", "2")])
        copy = pickle.loads(pickle.dumps(rows))
        assert type(copy) is type(rows) and copy == rows and not copy.regular


@pytest.mark.parametrize("regular", [True, False])
def test_the_batch_equals_the_rows_converted_one_by_one(regular: bool) -> None:
    for rows in _both():
        for n in range(5):
            _add(rows, n, {"a": "1", "b": str(n)}, [("a", "1"), ("b", str(n))])
        if not regular:
            _add(rows, 5, {"a": "1"}, [("a", "1"), ("a", "2")])
        assert rows.regular is regular
        given = pa.RecordBatch.from_struct_array(pa.array(list(rows), row_struct("frames")))
        assert frame_batch(rows).equals(given)


def test_a_session_models_frames_convert_as_their_dicts() -> None:
    """Real frames (a handshake, messages, acks, a transaction, an ERROR, a gap) through the
    model, under both twins."""
    for rows in _both():
        talk = Conversation(ModelOptions("preview", 8, b"k"))
        talk.handshake(client_hb="1000,1000", server_hb="1000,1000")
        talk.subscribe(5, "0", "client")
        for n in range(4):
            talk.message(10 + n, "0", f"m{n}", ack=f"a{n}", body=b"body %d" % n)
        talk.client(30, "ACK", [("id", "a2")])
        talk.server(31, "ERROR", [("message", "no"), ("message", "twice")], b"why")
        frames = talk.model.drain()["frames"]
        assert isinstance(frames, FrameRows) and len(frames) == 9
        assert not frames.regular  # the ERROR's repeated header
        rows.extend(frames)
        given = pa.RecordBatch.from_struct_array(pa.array(list(rows), row_struct("frames")))
        assert frame_batch(rows).equals(given)


def _batches_agree(rows: FrameRows) -> None:
    given = pa.RecordBatch.from_struct_array(pa.array(list(rows), row_struct("frames")))
    assert frame_batch(rows).equals(given)


def test_the_compiled_twin_holds_header_pairs_as_arrow_buffers() -> None:
    """Their text copied while it is fresh (`_frame_rows.HeaderPairs`); the map is the list
    read as dicts until a frame's headers do not follow its list."""
    python, built = _both()
    for rows in (python, built):
        _add(rows, 0, {"a": "1", "ü": "日本"}, [("a", "1"), ("ü", "日本")])
    pairs: Any = built.column("header_list")  # typed as the reference's list
    assert isinstance(pairs, columns.HeaderPairs) and not pairs.as_dicts
    assert built.column("headers")[0] == {"a": "1", "ü": "日本"}
    assert pairs[-1] == [("a", "1"), ("ü", "日本")]
    for rows in (python, built):
        _add(rows, 1, {"m": "first"}, [("m", "first"), ("m", "second")])
        _add(rows, 2, {"b": "2"}, [("b", "2")])
    assert isinstance(built.column("headers"), columns.HeaderPairs) and not built.regular
    assert [list(c) for c in python.columns] == [list(c) for c in built.columns]
    _batches_agree(built)


@pytest.mark.parametrize(("headers", "header_list", "follows"), ENTRIES)
def test_pairs_not_all_text_are_held_as_objects(
    headers: dict[str, str], header_list: Any, follows: bool
) -> None:
    python, built = _both()
    for rows in (python, built):
        _add(rows, 0, {"a": "1"}, [("a", "1")])
        _add(rows, 1, {"a": "1"}, [("a", "1"), ("a", "2")])
        _add(rows, 2, headers, header_list)
        _add(rows, 3, {"b": "2"}, [("b", "2")])
    assert [list(c) for c in python.columns] == [list(c) for c in built.columns]
    assert list(python) == list(built)


def test_text_without_utf8_is_held_as_objects_and_raises_as_arrow_raises() -> None:
    python, built = _both()
    for rows in (python, built):
        _add(rows, 0, {"a": "1"}, [("a", "1")])
        _add(rows, 1, {"a": "\udc80"}, [("a", "\udc80")])
    assert not isinstance(built.column("header_list"), columns.HeaderPairs)
    assert python == built
    for rows in (python, built):
        with pytest.raises(UnicodeEncodeError):
            frame_batch(rows)


def test_pairs_past_arrows_offsets_are_held_as_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columns, "OFFSET_LIMIT", 12)
    python, built = _both()
    for rows in (python, built):
        for n in range(4):
            _add(rows, n, {"name": f"value{n}"}, [("name", f"value{n}")])
    assert not isinstance(built.column("header_list"), columns.HeaderPairs)
    assert python == built
    _batches_agree(built)


@pytest.mark.parametrize("irregular", ["none", "mine", "theirs"])
def test_columns_joined_keep_their_pairs(irregular: str) -> None:
    python, built = _both()
    _, other = _both()
    for rows in (python, built):
        _add(rows, 0, {"a": "1"}, [("a", "1")])
    if irregular == "mine":
        for rows in (python, built):
            _add(rows, 1, {"a": "1"}, [("a", "1"), ("a", "2")])
    _add(other, 2, {"b": "2"}, [("b", "2")])
    if irregular == "theirs":
        _add(other, 3, {"c": "3"}, [("c", "3"), ("c", "4")])
    python.extend(other)
    built.extend(other)
    assert isinstance(built.column("header_list"), columns.HeaderPairs)
    assert python == built and built.regular is (irregular == "none")
    _batches_agree(built)
    copy = pickle.loads(pickle.dumps(built))
    assert copy == built and copy.regular is built.regular
    assert isinstance(copy.column("header_list"), columns.HeaderPairs)
