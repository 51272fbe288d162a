"""Engines other than Spark over the lake's Delta tables: DuckDB without a network, and the
column descriptions every engine can find (Delta's standard `comment` field metadata).

DuckDB's `delta` extension normally downloads itself on first use, which fails offline
("Failed to download extension"). The PyPI package `duckdb-extension-delta` ships the extension
file for the matching DuckDB release; `duckdb_connect` loads that file and, given a lake, makes a
view per table, with each column's description as a DuckDB column comment:

    from pipeline.lake import duckdb_connect
    con = duckdb_connect("work/lake")
    con.sql("SELECT version, count(*) FROM sessions GROUP BY 1").show()

Install both with `pip install 'stomp-lake[duckdb]'` (the versions must match).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

EXTENSION_FILE = "delta.duckdb_extension"


class DuckDBExtensionMissing(RuntimeError):
    pass


def delta_extension_path() -> Path:
    """The extension file shipped by `duckdb-extension-delta` for the installed DuckDB."""
    import duckdb

    try:
        import duckdb_extension_delta
    except ModuleNotFoundError as exc:
        raise DuckDBExtensionMissing(
            "DuckDB's delta extension is not installed: pip install duckdb-extension-delta"
        ) from exc
    root = Path(duckdb_extension_delta.__file__).parent / "extensions"
    wanted = root / f"v{duckdb.__version__}" / EXTENSION_FILE
    if wanted.is_file():
        return wanted
    found = sorted(root.rglob(EXTENSION_FILE))
    shipped = ", ".join(p.parent.name for p in found) or "none"
    raise DuckDBExtensionMissing(
        f"duckdb-extension-delta has no extension for DuckDB {duckdb.__version__} (it has: "
        f"{shipped}); install the same version of both"
    )


def duckdb_connect(
    lake: str | Path | None = None, database: str = ":memory:"
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the delta extension loaded from its file (no download); with a
    lake, one view per Delta table under `<lake>/tables/`, named as the table."""
    import duckdb

    connection = duckdb.connect(database, config={"autoinstall_known_extensions": False})
    connection.execute(f"LOAD {sql_string(str(delta_extension_path()))}")
    if lake is not None:
        tables = Path(lake) / "tables"
        for table in sorted(tables.iterdir()) if tables.is_dir() else []:
            if (table / "_delta_log").is_dir():
                _create_view(connection, table)
    return connection


def _create_view(connection: duckdb.DuckDBPyConnection, table: Path) -> None:
    name = _identifier(table.name)
    connection.execute(
        f"CREATE OR REPLACE VIEW {name} AS "
        f"SELECT * FROM delta_scan({sql_string(str(table.resolve()))})"
    )
    # delta_scan does not pass Delta's column comments on; DuckDB keeps them on the view.
    for column, comment in column_comments(table).items():
        connection.execute(
            f"COMMENT ON COLUMN {name}.{_identifier(column)} IS {sql_string(comment)}"
        )


def column_comments(table: str | Path) -> dict[str, str]:
    """Column -> description, from the Delta table's schema (field metadata `comment`), as
    delta-rs reads it; Polars takes the same `DeltaTable` (`pl.read_delta(DeltaTable(path))`)
    but keeps no column metadata of its own."""
    from deltalake import DeltaTable

    fields = DeltaTable(str(table)).schema().fields
    return {f.name: str(f.metadata["comment"]) for f in fields if "comment" in f.metadata}


def _identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def sql_string(text: str) -> str:
    """``text`` as an SQL string literal."""
    return "'" + text.replace("'", "''") + "'"
