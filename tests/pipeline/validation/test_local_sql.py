"""pipeline/validation/local_sql.py: the DuckDB database the tables' suites run on (views over
the batch's files, empty tables, the Spark functions the suites' SQL uses), its memory setting,
and the row filters it cannot bind."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import schemas
from pipeline.validation import local_sql
from tests.pipeline.validation.batch_rows import good_batch, to_files

INSTANTS = [
    datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
    datetime(1970, 1, 1, tzinfo=UTC),
    datetime(2024, 2, 29, 23, 59, 59, 999_999, tzinfo=UTC),
    datetime(2025, 1, 15, 10, 0, 0, 6, tzinfo=UTC),
    datetime(2099, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
]


def _database(
    tmp_path: Path, rows: dict[str, list[dict]], filters: dict[str, list[str]] | None = None
) -> local_sql.Database:
    folder = tmp_path / "db"
    folder.mkdir()
    files = to_files(tmp_path / "files", rows)
    return local_sql.create_database(folder, files, local_sql.CheckInputs(), filters)


def test_each_table_reads_its_files_with_the_tables_columns(tmp_path: Path) -> None:
    rows = good_batch("b1")
    rows["websocket_controls"] = []
    database = _database(tmp_path, rows)
    with duckdb.connect(str(database.path), read_only=True) as db:
        for table in schemas.TABLES:
            relation = db.table(table)
            assert tuple(relation.columns) == schemas.load(table).column_names, table
            assert database.columns[table] == tuple(relation.columns)
            assert len(relation.fetchall()) == len(rows[table]), table
        frames = db.table("frames").to_arrow_table()
    assert sorted(frames.column("frame_index").to_pylist()) == sorted(
        r["frame_index"] for r in rows["frames"]
    )
    assert set(frames.column("date").to_pylist()) == {r["date"] for r in rows["frames"]}


@pytest.mark.spark
def test_the_spark_functions_the_suites_use_give_sparks_values(spark, tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"ts": pa.array(INSTANTS, pa.timestamp("us", tz="UTC"))}), path)
    query = "SELECT unix_micros(ts) AS micros, to_date(ts) AS day FROM t ORDER BY ts"
    spark.read.parquet(str(path)).createOrReplaceTempView("t")
    expected = [tuple(r) for r in spark.sql(query).collect()]
    folder = tmp_path / "db"
    folder.mkdir()
    database = local_sql.create_database(folder, {}, local_sql.CheckInputs())
    with duckdb.connect(str(database.path)) as db:
        db.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{path}')")
        assert db.execute(query).fetchall() == expected
        # DuckDB's zone is the machine's: days stay UTC's, as Spark's session zone is
        for zone in ("Asia/Tokyo", "America/Los_Angeles"):
            db.execute(f"SET TimeZone = '{zone}'")
            assert db.execute(query).fetchall() == expected, zone
    assert expected[0][1].isoformat() == "1969-12-31"  # days in UTC, whatever the machine's zone


def test_row_filters_duckdb_cannot_bind_are_named(tmp_path: Path) -> None:
    good = ["latency_ms < 0", "abs(unix_micros(ts) - floor(ts_ns / 1000)) > 1"]
    bad = ["no_such_column > 0", "latency_ms <", "no_such_function(latency_ms)"]
    filters = {"acks": [*good, *bad], "frames": [], "errors": good[1:]}
    found = _database(tmp_path, good_batch("b1"), filters).unbound
    assert found == {"acks": frozenset(bad), "frames": frozenset(), "errors": frozenset()}


def test_memory_is_a_size_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(local_sql.MEMORY_VARIABLE, raising=False)
    assert local_sql.memory_limit() == local_sql.DEFAULT_MEMORY
    monkeypatch.setenv(local_sql.MEMORY_VARIABLE, "512MB")
    assert local_sql.memory_limit() == "512MB"
    options = local_sql.engine_options(Path("/x"))
    assert options["connect_args"]["config"]["memory_limit"] == "512MB"
    assert options["connect_args"]["read_only"] is True
    monkeypatch.setenv(local_sql.MEMORY_VARIABLE, "a lot")
    with pytest.raises(ValueError, match="STOMP_LAKE_VALIDATION_MEMORY"):
        local_sql.memory_limit()


def test_relations_are_reflected_once_as_each_alone(tmp_path: Path) -> None:
    import sqlalchemy as sa

    database = _database(tmp_path, good_batch("b1"))
    url = local_sql.connection_string(database.path)
    options = local_sql.engine_options(tmp_path / "db")
    alone, once = sa.create_engine(url, **options), sa.create_engine(url, **options)
    local_sql.reflected_once(once)
    statements: list[str] = []
    sa.event.listen(once, "before_cursor_execute", lambda *a: statements.append(a[2]))
    try:
        for name in database.columns:
            expected, got = sa.inspect(alone), sa.inspect(once)
            assert [(c["name"], str(c["type"])) for c in got.get_columns(name)] == [
                (c["name"], str(c["type"])) for c in expected.get_columns(name)
            ], name
            assert got.get_pk_constraint(name)["constrained_columns"] == []
            with pytest.raises(sa.exc.ProgrammingError):  # GX then takes the key as none
                expected.get_pk_constraint(name)
        assert statements == []
    finally:
        alone.dispose()
        once.dispose()
