from __future__ import annotations

import pyarrow as pa
import pytest

from schemas.ddl import Array, Map, Primitive, Struct, parse_type


def test_parses_nested_types() -> None:
    parsed = parse_type("array<struct<name:string, value:string>>")
    assert parsed == Array(Struct((("name", Primitive("string")), ("value", Primitive("string")))))
    assert parse_type("map<string,string>") == Map(Primitive("string"), Primitive("string"))


@pytest.mark.parametrize(
    ("text", "arrow"),
    [
        ("long", pa.int64()),
        ("int", pa.int32()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("date", pa.date32()),
        ("binary", pa.binary()),
        ("map<string,string>", pa.map_(pa.string(), pa.string())),
        ("array<long>", pa.list_(pa.int64())),
    ],
)
def test_arrow_types(text: str, arrow: pa.DataType) -> None:
    assert parse_type(text).to_arrow() == arrow


def test_spark_types_render_as_spark_ddl() -> None:
    parsed = parse_type("array<struct<name:string,value:string>>")
    assert parsed.to_spark().simpleString() == "array<struct<name:string,value:string>>"
    assert parse_type("map<string,string>").to_spark().simpleString() == "map<string,string>"
    assert parse_type("long").to_spark().simpleString() == "bigint"


@pytest.mark.parametrize("text", ["strng", "map<string>", "array<long", "struct<a>", "long x"])
def test_malformed_types_are_rejected(text: str) -> None:
    with pytest.raises(ValueError):
        parse_type(text)
