"""Table schemas of the lake, defined once in ``schemas/tables/<table>.json``.

Each JSON file holds the table's name, description, partition columns and columns (name, Spark DDL
type, nullability, description). ``load(table)`` turns it into a :class:`TableSchema` that can
render a pyarrow or a PySpark schema; PySpark is imported only when asked for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import pyarrow as pa

from schemas.ddl import DataType, parse_type

TABLES: tuple[str, ...] = (
    "sessions",
    "frames",
    "messages",
    "acks",
    "heartbeats",
    "receipts",
    "errors",
    "subscriptions",
    "transactions",
    "anomalies",
    "websocket_controls",
)


@dataclass(slots=True, frozen=True)
class Column:
    name: str
    type: str
    nullable: bool
    description: str

    @property
    def data_type(self) -> DataType:
        return parse_type(self.type)


@dataclass(slots=True, frozen=True)
class TableSchema:
    name: str
    description: str
    partition_by: tuple[str, ...]
    columns: tuple[Column, ...]

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(column.name for column in self.columns)

    def column(self, name: str) -> Column:
        for column in self.columns:
            if column.name == name:
                return column
        raise KeyError(f"{self.name} has no column {name!r}")

    def arrow_schema(self) -> pa.Schema:
        return pa.schema(
            [pa.field(c.name, c.data_type.to_arrow(), nullable=c.nullable) for c in self.columns],
            metadata={"description": self.description},
        )

    def arrow_table(self, rows: list[dict[str, Any]]) -> pa.Table:
        """Rows as a pyarrow Table of this schema; raises ValueError when a row's keys differ
        from the columns or a non-nullable column holds a null (pyarrow does not check that)."""
        expected = set(self.column_names)
        for number, row in enumerate(rows):
            if row.keys() != expected:
                missing = sorted(expected - row.keys())
                extra = sorted(row.keys() - expected)
                raise ValueError(f"{self.name} row {number}: missing {missing}, extra {extra}")
        table = pa.Table.from_pylist(rows, schema=self.arrow_schema())
        for column in self.columns:
            if not column.nullable and table.column(column.name).null_count:
                raise ValueError(f"{self.name}.{column.name} is not nullable but holds nulls")
        return table

    def spark_schema(self) -> Any:
        """The table as a ``pyspark.sql.types.StructType`` (descriptions as column comments)."""
        from pyspark.sql.types import StructField, StructType

        return StructType(
            [
                StructField(
                    c.name,
                    c.data_type.to_spark(),
                    nullable=c.nullable,
                    metadata={"comment": c.description},
                )
                for c in self.columns
            ]
        )


@cache
def load(table: str) -> TableSchema:
    if table not in TABLES:
        raise KeyError(f"unknown table {table!r}; known: {', '.join(TABLES)}")
    text = resources.files(__package__).joinpath("tables", f"{table}.json").read_text("utf-8")
    raw = json.loads(text)
    columns = tuple(
        Column(c["name"], c["type"], bool(c["nullable"]), c["description"]) for c in raw["columns"]
    )
    for column in columns:
        parse_type(column.type)  # fail at load time on a malformed type string
    return TableSchema(
        name=raw["name"],
        description=raw["description"],
        partition_by=tuple(raw["partition_by"]),
        columns=columns,
    )
