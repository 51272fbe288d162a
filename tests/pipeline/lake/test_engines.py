"""Other engines on a lake's tables: DuckDB offline with the shipped extension file, and the
column descriptions Delta keeps under its standard `comment` metadata."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import schemas
from pipeline.lake import duckdb_connect
from pipeline.lake.engines import column_comments, delta_extension_path
from pipeline.lake.table_schema import to_arrow_schema

polars = pytest.importorskip("polars")


def _lake(root: Path) -> Path:
    """Two tables written by delta-rs with the schemas and comments the pipeline commits."""
    for name in ("sessions", "errors"):
        schema = to_arrow_schema(schemas.load(name).spark_schema())
        write_deltalake(str(root / "tables" / name), schema.empty_table())
    return root


def test_spark_column_metadata_becomes_deltas_comment() -> None:
    schema = to_arrow_schema(schemas.load("sessions").spark_schema())
    login = schemas.load("sessions").column("login")
    assert schema.field("login").metadata == {b"comment": login.description.encode()}
    assert all(b"SPARK::metadata::json" not in (f.metadata or {}) for f in schema)


def test_duckdb_connects_offline_with_a_view_and_comments_per_table(tmp_path: Path) -> None:
    lake = _lake(tmp_path)
    assert delta_extension_path().is_file()
    con = duckdb_connect(lake)
    assert con.sql("SELECT count(*) FROM sessions").fetchone() == (0,)
    comments = dict(
        con.sql(
            "SELECT column_name, comment FROM duckdb_columns() WHERE table_name = 'errors'"
        ).fetchall()
    )
    assert comments == {c.name: c.description for c in schemas.load("errors").columns}
    assert con.sql("SELECT current_setting('autoinstall_known_extensions')").fetchone() == (False,)


def test_every_engine_sees_rows_and_descriptions(tmp_path: Path) -> None:
    table = tmp_path / "tables" / "t"
    schema = pa.schema([pa.field("port", pa.int64(), metadata={"comment": "client TCP port"})])
    write_deltalake(str(table), pa.table({"port": [41790]}, schema=schema))
    assert DeltaTable(str(table)).schema().fields[0].metadata == {"comment": "client TCP port"}
    assert column_comments(table) == {"port": "client TCP port"}
    assert polars.read_delta(DeltaTable(str(table))).to_dicts() == [{"port": 41790}]
    con = duckdb_connect(tmp_path)
    assert con.sql("SELECT port FROM t").fetchall() == [(41790,)]
    assert con.sql("SELECT comment FROM duckdb_columns() WHERE table_name = 't'").fetchall() == [
        ("client TCP port",)
    ]


def test_the_readme_duckdb_steps_run_as_written(tmp_path: Path) -> None:
    """The README's snippet, run by a fresh interpreter with no network to download from."""
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    block = readme.split("```python\n", 1)[1].split("```", 1)[0]
    lines = [line for line in block.splitlines() if "duckdb" in line]
    assert lines, "the README shows no DuckDB step"
    _lake(tmp_path / "work" / "lake")
    done = subprocess.run(
        [sys.executable, "-c", "\n".join(lines)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[3]),
             "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
