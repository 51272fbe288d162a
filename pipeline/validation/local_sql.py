"""The batch's validation suites run by GX's SQL engine on DuckDB, over the batch's own files.

On one machine a suite on Spark costs 0.3-4 s whatever the batch's size: each of its queries is
planned, code-generated and compiled by the JVM before it reads a row (2.26 GB: validation
11-12 s, 30% of the run). DuckDB reads the same staged files in-process; a suite takes 0.1 s.
The suites are the same JSON, checked by the same GX expectations: their SQL is Spark's, and the
two Spark functions they use are defined here as DuckDB macros (`SPARK_FUNCTIONS`).

What is read: one view per table over exactly the files validation would read on Spark (the
staged files, ``date`` from their hive-style folders), columns and types as the table's schema;
a table with no file is an empty table of that schema. The cross-table checks are relations of
their own (:mod:`pipeline.validation.local_checks`). DuckDB's memory is capped
(`DEFAULT_MEMORY`, or ``$STOMP_LAKE_VALIDATION_MEMORY``): past it, it spills to the folder.

GX 1.24 returns a query's result after giving its connection back to the pool, and the DuckDB
driver (duckdb_engine) drops a result whose connection is given back: results come back empty.
`buffered_results` makes the execution engine read each result before it lets go.
"""

from __future__ import annotations

import os
import re
import types
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

import schemas
from pipeline.lake.table_schema import to_arrow_schema
from pipeline.validation import local_checks
from pipeline.validation.local_checks import CheckInputs, literal

MEMORY_VARIABLE = "STOMP_LAKE_VALIDATION_MEMORY"
DEFAULT_MEMORY = "1GB"
DATABASE_NAME = "validation.duckdb"
# Spark SQL functions the suites' queries use, as DuckDB macros (instants are UTC: DuckDB casts
# a TIMESTAMPTZ to DATE in UTC when no time zone extension is loaded, as here).
SPARK_FUNCTIONS = {
    "unix_micros": "epoch_us(t)",
    "to_date": "CAST(t AS DATE)",
}
_MEMORY = re.compile(r"\d+(\.\d+)?\s*[KMGT]i?B", re.I)


def memory_limit() -> str:
    value = os.environ.get(MEMORY_VARIABLE, DEFAULT_MEMORY).strip()
    if not _MEMORY.fullmatch(value):
        raise ValueError(f"${MEMORY_VARIABLE}: {value!r} is not a size such as 512MB or 2GB")
    return value


def table_schema(table: str) -> pa.Schema:
    """The table's columns as validation sees them (Spark's schema, in Arrow)."""
    return to_arrow_schema(schemas.load(table).spark_schema())


def create_database(
    folder: Path,
    files: Mapping[str, Iterable[Path]],
    inputs: CheckInputs,
) -> Path:
    """A DuckDB database in ``folder`` with the Spark macros, a view of its ``files`` (or an
    empty table) per table, and the cross-table check relations; returns its path."""
    import duckdb

    path = folder / DATABASE_NAME
    with duckdb.connect(str(path)) as db:
        for name, body in SPARK_FUNCTIONS.items():
            db.execute(f"CREATE MACRO {name}(t) AS {body}")
        for table in schemas.TABLES:
            paths = [str(p) for p in files.get(table, ())]
            _table_view(db, table, table_schema(table), paths)
        local_checks.create(db, inputs)
    return path


def _table_view(db: Any, name: str, schema: pa.Schema, files: list[str]) -> None:
    """``name``: the files' rows, columns as ``schema``; with no file, an empty table."""
    if not files:
        db.register("empty_rows", schema.empty_table())
        db.execute(f'CREATE TABLE "{name}" AS SELECT * FROM empty_rows')
        db.unregister("empty_rows")
        return
    columns = ", ".join(f'"{field.name}"' for field in schema)
    names = ", ".join(literal(f) for f in files)  # a view takes no parameters
    db.execute(
        f'CREATE VIEW "{name}" AS SELECT {columns} FROM read_parquet([{names}], '
        "hive_partitioning = true, hive_types = {'date': DATE}, union_by_name = true)"
    )


def connection_string(path: Path) -> str:
    return f"duckdb:///{path}"


def engine_options(folder: Path) -> dict[str, Any]:
    """`create_engine` options for GX's SQL data source: read-only, memory capped, spilling to
    ``folder``."""
    config = {
        "memory_limit": memory_limit(),
        "temp_directory": str(folder / "spill"),
        "threads": os.cpu_count() or 1,
    }
    return {"connect_args": {"read_only": True, "config": config}}


def buffered_results(engine: Any) -> None:
    """Makes GX's SQL execution engine ``engine`` read each query's result while it still holds
    the connection (see the module docstring)."""

    def execute_query(self: Any, query: Any) -> Any:
        with self.get_connection() as connection:
            result = self._execute_query_with_recovery(connection, query)
            return result.freeze()()

    engine.execute_query = types.MethodType(execute_query, engine)


def relation_columns(path: Path, names: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """The columns of each relation ``names`` in the database."""
    import duckdb

    with duckdb.connect(str(path)) as db:
        return {name: tuple(db.table(name).columns) for name in names}


def unresolved(path: Path, conditions: Mapping[str, list[str]]) -> dict[str, frozenset[str]]:
    """Of each table's row filters, those DuckDB cannot bind: they stay queries of their own,
    as on Spark (`gate._resolved_on`). Before GX connects: DuckDB opens a database once per
    process, with the settings of the first connection."""
    import duckdb

    def binds(table: str, some: list[str]) -> bool:
        counts = ", ".join(f"count(CASE WHEN {c} THEN 1 END)" for c in some)
        try:
            db.execute(f'EXPLAIN SELECT {counts} FROM "{table}"')
        except duckdb.Error:
            return False
        return True

    found: dict[str, frozenset[str]] = {}
    with duckdb.connect(str(path)) as db:
        for table, some in conditions.items():
            if not some or binds(table, some):
                found[table] = frozenset()
            else:
                found[table] = frozenset(c for c in some if not binds(table, [c]))
    return found
