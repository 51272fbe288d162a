"""Parse the Spark DDL type strings used in the table JSON (``map<string,string>`` ...).

Only what the schemas need: primitive names, ``array<T>``, ``map<K,V>`` and
``struct<name:T,...>``. Each parsed type renders itself as pyarrow or PySpark.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import pyarrow as pa

_ARROW_PRIMITIVES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "long": pa.int64(),
    "bigint": pa.int64(),
    "int": pa.int32(),
    "integer": pa.int32(),
    "short": pa.int16(),
    "double": pa.float64(),
    "float": pa.float32(),
    "boolean": pa.bool_(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "date": pa.date32(),
    "binary": pa.binary(),
}

_SPARK_PRIMITIVES: dict[str, str] = {
    "string": "StringType",
    "long": "LongType",
    "bigint": "LongType",
    "int": "IntegerType",
    "integer": "IntegerType",
    "short": "ShortType",
    "double": "DoubleType",
    "float": "FloatType",
    "boolean": "BooleanType",
    "timestamp": "TimestampType",
    "date": "DateType",
    "binary": "BinaryType",
}


@dataclass(slots=True, frozen=True)
class Primitive:
    name: str

    def to_arrow(self) -> pa.DataType:
        return _ARROW_PRIMITIVES[self.name]

    def to_spark(self) -> Any:
        from pyspark.sql import types

        return getattr(types, _SPARK_PRIMITIVES[self.name])()


@dataclass(slots=True, frozen=True)
class Array:
    element: DataType

    def to_arrow(self) -> pa.DataType:
        return pa.list_(self.element.to_arrow())

    def to_spark(self) -> Any:
        from pyspark.sql.types import ArrayType

        return ArrayType(self.element.to_spark(), containsNull=True)


@dataclass(slots=True, frozen=True)
class Map:
    key: DataType
    value: DataType

    def to_arrow(self) -> pa.DataType:
        return pa.map_(self.key.to_arrow(), self.value.to_arrow())

    def to_spark(self) -> Any:
        from pyspark.sql.types import MapType

        return MapType(self.key.to_spark(), self.value.to_spark(), valueContainsNull=True)


@dataclass(slots=True, frozen=True)
class Struct:
    fields: tuple[tuple[str, DataType], ...]

    def to_arrow(self) -> pa.DataType:
        return pa.struct([pa.field(name, type_.to_arrow()) for name, type_ in self.fields])

    def to_spark(self) -> Any:
        from pyspark.sql.types import StructField, StructType

        return StructType([StructField(name, t.to_spark(), True) for name, t in self.fields])


DataType = Primitive | Array | Map | Struct


@cache
def parse_type(text: str) -> DataType:
    parser = _Parser(text.replace(" ", "").lower())
    result = parser.type_()
    if parser.pos != len(parser.text):
        raise ValueError(f"trailing text in type {text!r} at {parser.pos}")
    return result


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def type_(self) -> DataType:
        name = self._name()
        if name == "array":
            self._expect("<")
            element = self.type_()
            self._expect(">")
            return Array(element)
        if name == "map":
            self._expect("<")
            key = self.type_()
            self._expect(",")
            value = self.type_()
            self._expect(">")
            return Map(key, value)
        if name == "struct":
            self._expect("<")
            fields = [self._field()]
            while self._peek() == ",":
                self.pos += 1
                fields.append(self._field())
            self._expect(">")
            return Struct(tuple(fields))
        if name not in _ARROW_PRIMITIVES:
            raise ValueError(f"unknown type {name!r} in {self.text!r}")
        return Primitive(name)

    def _field(self) -> tuple[str, DataType]:
        name = self._name()
        self._expect(":")
        return name, self.type_()

    def _name(self) -> str:
        start = self.pos
        while self.pos < len(self.text) and (
            self.text[self.pos].isalnum() or self.text[self.pos] == "_"
        ):
            self.pos += 1
        if start == self.pos:
            raise ValueError(f"expected a name at {start} in {self.text!r}")
        return self.text[start : self.pos]

    def _peek(self) -> str:
        return self.text[self.pos : self.pos + 1]

    def _expect(self, char: str) -> None:
        if self._peek() != char:
            raise ValueError(f"expected {char!r} at {self.pos} in {self.text!r}")
        self.pos += 1
