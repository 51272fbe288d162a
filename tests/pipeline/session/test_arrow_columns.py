"""`pipeline.session._arrow_columns`: columns built in Arrow's buffers equal `pyarrow.array` of
the same values, its errors included."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

import pyarrow as pa
import pytest

from pipeline.net import Direction

columns = pytest.importorskip("pipeline.session._arrow_columns")

TEXT_MAP = pa.map_(pa.string(), pa.string())
CASES: list[tuple[pa.DataType, list[Any]]] = [
    (pa.string(), ["a", None, "", "ü日本", None, "z" * 300]),
    (pa.string(), [Direction.C2S, "a", Direction.S2C]),  # a StrEnum's text
    (pa.string(), []),
    (pa.string(), [None, None]),
    (pa.binary(), [b"a\x00b", None, b""]),
    (pa.int64(), [0, None, -(2**63), 2**63 - 1, 7]),
    (TEXT_MAP, [{"a": "1", "ü": "日本"}, {}, {"b": "2"}]),
    (pa.float64(), [2.5, None, -0.0, 1e308, float("inf")]),
    (pa.int32(), [0, None, -(2**31), 2**31 - 1]),
    (pa.bool_(), [True, None, False, True, True, False, True, False, True]),
    (
        pa.date32(),
        [date(1970, 1, 1), None, date(1969, 12, 31), date(1, 1, 1), date(9999, 12, 31)]
        + [date(2024, 2, 29), date(2000, 3, 1), date(1900, 3, 1), date(2025, 1, 15)],
    ),
    (pa.list_(pa.string()), [["a"], None]),  # held as a list throughout
    # values the buffers do not take: a list from then on, converted by Arrow
    (pa.string(), ["a", b"bytes"]),
    (pa.binary(), [b"a", "text"]),
    (pa.int64(), [1, 2.0]),
    (pa.float64(), [2.5, 1]),
    (pa.date32(), [date(2025, 1, 15), datetime(2025, 1, 15, 10, 0)]),
    (TEXT_MAP, [{"a": "1"}, None, {"b": "2"}]),
    (TEXT_MAP, [{"a": "1"}, {"b": "2", "c": None}, {"d": "4"}]),  # refused after "b"
    (TEXT_MAP, [{"a": "1"}, [("b", "2")]]),
]


def _built(type_: pa.DataType, values: list[Any]) -> pa.Array:
    column = columns.column_for(type_)
    for value in values:
        column.append(value)
    return column.arrow()


@pytest.mark.parametrize(("type_", "values"), CASES)
def test_a_column_equals_arrows_conversion(type_: pa.DataType, values: list[Any]) -> None:
    built = _built(type_, values)
    built.validate(full=True)
    assert built.equals(pa.array(values, type_)) and built.type == type_


@pytest.mark.parametrize(
    ("type_", "values"),
    [
        (pa.int64(), [1, 2**63]),
        (pa.int64(), [1, None, True]),
        (pa.string(), ["a", 3]),
        (pa.string(), ["a", "\udc80"]),
        (pa.int32(), [1, 2**31]),
        (pa.int32(), [1, True]),
        (pa.bool_(), [True, 1]),
        (pa.int32(), [1, -(2**31) - 1]),
        (pa.float64(), [1.5, "2.5"]),
        (pa.date32(), [date(2025, 1, 15), "2025-01-15"]),
    ],
)
def test_a_value_arrow_refuses_raises_as_arrow_raises(
    type_: pa.DataType, values: list[Any]
) -> None:
    with pytest.raises(Exception) as expected:
        pa.array(values, type_)
    with pytest.raises(expected.type):
        _built(type_, values)


def test_text_past_arrows_offsets_is_converted_by_arrow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columns, "OFFSET_LIMIT", 5)
    values = ["abc", None, "def", "g"]
    for type_ in (pa.string(), TEXT_MAP):
        given = values if type_ == pa.string() else [{"k": v or ""} for v in values]
        assert _built(type_, given).equals(pa.array(given, type_))


@pytest.mark.parametrize(("type_", "values"), CASES)
def test_a_column_reads_as_its_values(type_: pa.DataType, values: list[Any]) -> None:
    column = columns.column_for(type_)
    for value in values:
        column.append(value)
    assert len(column) == len(values) and list(column) == values
    assert [column[i] for i in range(-len(values), len(values))] == values + values
    with pytest.raises(IndexError):
        column[len(values)]


@pytest.mark.parametrize(("type_", "values"), CASES)
def test_columns_extended_by_columns_or_values(type_: pa.DataType, values: list[Any]) -> None:
    """A column of the same kind adds its buffers; any other, its values."""
    for given in (_filled(type_, values), values, _filled(type_, [*values, *values])):
        column = _filled(type_, values)
        column.extend(given)
        expected = [*values, *given]
        assert list(column) == expected
        assert column.arrow().equals(pa.array(expected, type_))


@pytest.mark.parametrize(("type_", "values"), CASES)
def test_columns_joined_many_times_keep_every_value(type_: pa.DataType, values: list[Any]) -> None:
    """Each join grows the buffers past what they hold, as a row group's joins do."""
    column = _filled(type_, [])
    for _ in range(300):
        column.extend(_filled(type_, values))
    assert column.arrow().equals(pa.array(values * 300, type_))


def test_text_joined_past_arrows_offsets_is_converted_by_arrow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(columns, "OFFSET_LIMIT", 5)
    column, other = _filled(pa.string(), ["abc"]), _filled(pa.string(), ["def"])
    column.extend(other)
    assert column.arrow().equals(pa.array(["abc", "def"]))


def _filled(type_: pa.DataType, values: list[Any]) -> Any:
    column = columns.column_for(type_)
    column.extend(values)
    return column


class _Held:
    """A row that holds the values of one case of each of `CASES`' types."""

    def __init__(self, values: tuple[Any, ...]) -> None:
        self.values = values

    def held(self) -> tuple[Any, ...]:
        return self.values


def test_held_arrays_are_arrows_arrays_of_the_held_columns() -> None:
    types = tuple(type_ for type_, values in CASES if values)
    length = min(len(values) for _, values in CASES if values)
    rows = [_Held(tuple(values[i] for _, values in CASES if values)) for i in range(length)]
    built = columns.held_arrays(rows, types)
    for index, (array, type_) in enumerate(zip(built, types, strict=True)):
        expected = pa.array([row.values[index] for row in rows], type_)
        assert array.equals(expected), type_
    assert [len(a) for a in columns.held_arrays([], types)] == [0] * len(types)
    with pytest.raises(ValueError, match="holds"):
        columns.held_arrays(rows, types[:-1])


def test_dict_arrays_are_arrows_conversion_of_the_rows_as_structs() -> None:
    cases = [(type_, values) for type_, values in CASES if values]
    names = tuple(f"c{index}" for index in range(len(cases)))
    types = tuple(type_ for type_, _values in cases)
    length = min(len(values) for _, values in cases)
    rows = [
        {
            name: values[i]
            for index, (name, (_, values)) in enumerate(zip(names, cases, strict=True))
            if index != i
        }
        for i in range(length)
    ]  # row i lacks column i: null there
    rows[0]["not a column"] = object()  # ignored, as Arrow ignores it
    struct = pa.struct([pa.field(name, type_) for name, type_ in zip(names, types, strict=True)])
    expected = pa.RecordBatch.from_struct_array(pa.array(rows, struct))
    built = columns.dict_arrays(rows, names, types)
    for index, array in enumerate(built):
        array.validate(full=True)
        assert array.equals(expected.column(index)), types[index]
    assert [len(a) for a in columns.dict_arrays([], names, types)] == [0] * len(types)
    with pytest.raises(ValueError, match="types"):
        columns.dict_arrays(rows, names, types[:-1])
    with pytest.raises(TypeError, match="dict"):
        columns.dict_arrays([list(rows[0].items())], names, types)


@pytest.mark.parametrize(("type_", "value"), [(pa.int64(), 2**63), (pa.string(), 3)])
def test_dict_arrays_raise_where_arrows_conversion_raises(type_: pa.DataType, value: Any) -> None:
    struct = pa.struct([pa.field("c", type_)])
    with pytest.raises(Exception) as expected:
        pa.array([{"c": value}], struct)
    with pytest.raises(expected.type):
        columns.dict_arrays([{"c": None}, {"c": value}], ("c",), (type_,))
