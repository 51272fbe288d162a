"""The batch's validation suites run by GX's SQL engine on DuckDB, over the batch's own files.

On one machine a suite on Spark costs 0.3-4 s whatever the batch's size: each of its queries is
planned, code-generated and compiled by the JVM before it reads a row (2.26 GB: validation
11-12 s, 30% of the run). DuckDB reads the same staged files in-process; a suite takes 0.1 s.
The suites are the same JSON, checked by the same GX expectations: their SQL is Spark's, and the
two Spark functions they use are defined here as DuckDB macros (`SPARK_FUNCTIONS`).

What is read: one view per table over exactly the files validation would read on Spark (the
staged files, ``date`` from their hive-style folders), columns and types as the table's schema;
a table with no file is an empty table of that schema. The cross-table checks
(:mod:`pipeline.validation.checks`, the SQL Spark runs too) are tables of their own. DuckDB's
memory is capped (`DEFAULT_MEMORY`, or ``$STOMP_LAKE_VALIDATION_MEMORY``): past it, it spills
to the folder.

GX 1.24 returns a query's result after giving its connection back to the pool, and the DuckDB
driver (duckdb_engine) drops a result whose connection is given back: results come back empty.
`buffered_results` makes the execution engine read each result before it lets go.

GX reflects each relation's columns and primary key with catalog queries of its own, which
DuckDB answers through its PostgreSQL catalog views in 40-60 ms a relation (0.58 GB: 0.8 of the
suites' 1.8 s of queries). `reflected_once` reflects every relation's columns in one query, and
answers that none has a primary key: none has (DuckDB fails that query, which GX takes as none).
"""

from __future__ import annotations

import os
import re
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

import schemas
from pipeline.lake.engines import sql_string
from pipeline.validation.checks import KNOWN_SESSIONS, RELATIONS, check_queries
from pipeline.validation.suites import CROSS_TABLE_SUITES, SUITE_NAMES

MEMORY_VARIABLE = "STOMP_LAKE_VALIDATION_MEMORY"
# Small messages, one 3.22 GB connection (validation is the run's peak of memory): the driver's
# peak 546 MB with 256 MB, 801 MB with 512 MB, 943 MB with 1 GB; validation 3.6, 4.3 and 3.7 s.
DEFAULT_MEMORY = "256MB"
DATABASE_NAME = "validation.duckdb"
# Spark SQL functions the suites' queries use, as DuckDB macros.
SPARK_FUNCTIONS = {
    "unix_micros": "epoch_us(t)",
    # The day in UTC, Spark's session zone (pipeline.spark.session). A timestamp with a zone
    # cast to a date takes DuckDB's zone, which is the machine's (its wheel has ICU): on a
    # machine in another zone the rows near midnight failed the tables' date checks. On UTC it
    # took 7x longer (2.26 GB: 0.16 of the frames suite's 0.23 s query, on one thread).
    "to_date": "CAST(make_timestamp(epoch_us(t)) AS DATE)",
}
_MEMORY = re.compile(r"\d+(\.\d+)?\s*[KMGT]i?B", re.I)


def memory_limit() -> str:
    value = os.environ.get(MEMORY_VARIABLE, DEFAULT_MEMORY).strip()
    if not _MEMORY.fullmatch(value):
        raise ValueError(f"${MEMORY_VARIABLE}: {value!r} is not a size such as 512MB or 2GB")
    return value


@dataclass(slots=True)
class CheckInputs:
    """What the checks need besides the batch's tables: the sessions published before (files of
    the lake's ``sessions`` snapshot), those still open, and the run's counters (with the time
    of the batch's last packet, ``capture_last_ns``)."""

    published_files: list[str] = field(default_factory=list)
    open_sessions: list[str] = field(default_factory=list)
    counts: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Database:
    """The DuckDB database a batch is validated on, and what GX needs to know of it."""

    path: Path
    columns: dict[str, tuple[str, ...]]  # of each suite's relation: a table or a check
    unbound: dict[str, frozenset[str]]  # row filters DuckDB cannot bind, by table


def create_database(
    folder: Path,
    files: Mapping[str, Iterable[Path]],
    inputs: CheckInputs,
    filters: Mapping[str, list[str]] | None = None,
) -> Database:
    """A DuckDB database in ``folder`` with the Spark macros, a view of its ``files`` (or an
    empty table) per table, and the cross-table check relations; with the columns of each
    relation and which of the tables' row ``filters`` DuckDB cannot bind (:func:`unresolved`).
    All in one connection, before GX connects: DuckDB opens a database once per process, with
    the settings of its first connection."""
    import duckdb

    path = folder / DATABASE_NAME
    with duckdb.connect(str(path)) as db:
        for name, body in SPARK_FUNCTIONS.items():
            db.execute(f"CREATE MACRO {name}(t) AS {body}")
        for table in schemas.TABLES:
            paths = [str(p) for p in files.get(table, ())]
            _table_view(db, table, schemas.load(table).arrow_schema(), paths)
        _checks(db, inputs)
        columns = {name: tuple(db.table(name).columns) for name in SUITE_NAMES}
        unbound = {t: unresolved(db, t, some) for t, some in (filters or {}).items()}
    return Database(path, columns, unbound)


def relation_names() -> dict[str, str]:
    """The checks' relation fields (and the checks' own names) as this database's names."""
    return {name: f'"{name}"' for name in (*RELATIONS, *CROSS_TABLE_SUITES)}


def _checks(db: Any, inputs: CheckInputs) -> None:
    """``known_sessions``, then a table per cross-table check: computed now (a row per session,
    a row per table), where a view would be computed again by each of their suites' queries."""
    known = pa.table({"session_id": pa.array(inputs.open_sessions, pa.string())})
    db.register("open_sessions", known)
    db.execute("CREATE TABLE open_session_ids AS SELECT session_id FROM open_sessions")
    db.unregister("open_sessions")
    published = "SELECT NULL::VARCHAR AS session_id WHERE FALSE"
    if inputs.published_files:
        names = ", ".join(sql_string(f) for f in inputs.published_files)
        published = f"SELECT session_id FROM read_parquet([{names}], union_by_name = true)"
    db.execute(
        f"CREATE VIEW {KNOWN_SESSIONS} AS "
        f"{published} UNION ALL SELECT session_id FROM open_session_ids"
    )
    relations = relation_names()
    for name, query in check_queries(inputs.counts).items():
        db.execute(f"CREATE TABLE {relations[name]} AS {query.format(**relations)}")


def _table_view(db: Any, name: str, schema: pa.Schema, files: list[str]) -> None:
    """``name``: the files' rows, columns as ``schema``; with no file, an empty table."""
    if not files:
        db.register("empty_rows", schema.empty_table())
        db.execute(f'CREATE TABLE "{name}" AS SELECT * FROM empty_rows')
        db.unregister("empty_rows")
        return
    columns = ", ".join(f'"{field.name}"' for field in schema)
    names = ", ".join(sql_string(f) for f in files)  # a view takes no parameters
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


def reflected_once(engine: Any) -> None:
    """Makes the SQLAlchemy ``engine`` (GX's) reflect the database's relations' columns once, in
    one catalog query, and know they have no primary key (see the module docstring)."""
    import sqlalchemy as sa
    from sqlalchemy.engine.reflection import ObjectKind

    dialect = engine.dialect
    found = sa.inspect(engine).get_multi_columns(kind=ObjectKind.ANY)
    reflected = {name: columns for (_, name), columns in found.items()}
    reflect_columns, reflect_key = dialect.get_columns, dialect.get_pk_constraint

    def get_columns(connection: Any, table_name: str, schema: str | None = None, **kw: Any) -> Any:
        columns = reflected.get(str(table_name)) if schema is None else None
        if columns is None:
            return reflect_columns(connection, table_name, schema, **kw)
        return [dict(column) for column in columns]

    def get_pk_constraint(
        connection: Any, table_name: str, schema: str | None = None, **kw: Any
    ) -> Any:
        if schema is None and str(table_name) in reflected:
            return {"constrained_columns": [], "name": None}
        return reflect_key(connection, table_name, schema, **kw)

    dialect.get_columns = get_columns
    dialect.get_pk_constraint = get_pk_constraint


def unresolved(db: Any, table: str, conditions: list[str]) -> frozenset[str]:
    """Of ``table``'s row filters, those DuckDB cannot bind (connection ``db``): they stay
    queries of their own, as on Spark (`on_spark.resolved_on`)."""
    import duckdb

    def binds(some: list[str]) -> bool:
        counts = ", ".join(f"count(CASE WHEN {c} THEN 1 END)" for c in some)
        try:
            db.execute(f'EXPLAIN SELECT {counts} FROM "{table}"')
        except duckdb.Error:
            return False
        return True

    if not conditions or binds(conditions):
        return frozenset()
    return frozenset(c for c in conditions if not binds([c]))
