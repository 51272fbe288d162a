"""The suites on DuckDB (:class:`DuckDbEngine`): GX's SQL engine over a DuckDB database of the
batch's files on this machine (:mod:`pipeline.validation.local_sql`), in which the cross-table
checks are tables."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

import schemas
from pipeline.lake.commit import open_table
from pipeline.lake.layout import Lake, make_private_dir
from pipeline.lake.reader import snapshot_files
from pipeline.validation import local_sql
from pipeline.validation.expectations import load_counted_suite
from pipeline.validation.gx_context import add_definition, run_definition
from pipeline.validation.samples import sample_rows
from pipeline.validation.suites import CROSS_TABLE_SUITES, row_filters

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FOLDER = "duckdb"  # under the batch's run folder, removed once validated


class DuckDbEngine:
    def __init__(
        self,
        spark: SparkSession,
        lake: Lake,
        batch_id: str,
        tables: Mapping[str, DataFrame],
        counts: Mapping[str, Any],
        open_sessions: DataFrame | None,
        files: Mapping[str, list[Path]],
    ) -> None:
        self.spark, self.lake, self.batch_id = spark, lake, batch_id
        self.tables, self.counts, self.open_sessions = tables, counts, open_sessions
        self.files = files
        self.folder = lake.runs_dir / batch_id / FOLDER
        self.database: local_sql.Database | None = None
        self.source: Any = None  # GX's data source on the database
        self.definitions: dict[str, Any] = {}

    def start_checks(self) -> Future[float]:
        """The database, with the checks as tables: made now, before GX connects (DuckDB opens
        a database once per process, with the settings of its first connection)."""
        mark = time.monotonic()
        make_private_dir(self.folder)
        inputs = local_sql.CheckInputs(
            _published_sessions(self.lake), _session_ids(self.open_sessions), self.counts
        )
        filters = {t: row_filters(t) for t in schemas.TABLES}
        self.database = local_sql.create_database(self.folder, self.files, inputs, filters)
        done: Future[float] = Future()
        done.set_result(time.monotonic() - mark)
        return done

    def _database(self) -> local_sql.Database:
        if self.database is None:
            raise RuntimeError("the checks are not started: no database yet")
        return self.database

    def define(self, context: Any, names: Iterable[str]) -> None:
        database = self._database()
        if self.source is None:
            self.source = context.data_sources.add_sql(
                "batch_tables",
                connection_string=local_sql.connection_string(database.path),
                kwargs=local_sql.engine_options(self.folder),
            )
            local_sql.buffered_results(self.source.get_execution_engine())
            local_sql.reflected_once(self.source.get_execution_engine().engine)
        for name in names:

            def foldable(condition: str, name: str = name) -> bool:
                return condition not in database.unbound.get(name, frozenset())

            asset = self.source.add_table_asset(name, table_name=name)
            batch = asset.add_batch_definition_whole_table("batch")
            suite = load_counted_suite(name, foldable=foldable)
            self.definitions[name] = add_definition(context, name, batch, suite)

    def run_suite(self, name: str, *, detailed: bool) -> Any:
        columns = list(self._database().columns[name])
        return run_definition(
            self.definitions[name], None, columns, self.batch_id, detailed=detailed
        )

    def rows(self, query: str) -> list[dict[str, Any]]:
        return self._arrow(query.format(**local_sql.relation_names())).to_pylist()

    def _arrow(self, query: str) -> Any:
        """The query's result as Arrow, on GX's connections once it has them (DuckDB opens a
        database once per process: a connection of other settings is refused meanwhile)."""
        import duckdb

        if self.source is not None:
            connection = self.source.get_execution_engine().engine.raw_connection()
            try:
                return connection.driver_connection.execute(query).to_arrow_table()
            finally:
                connection.close()
        options = local_sql.engine_options(self.folder)["connect_args"]
        with duckdb.connect(str(self._database().path), **options) as db:
            return db.execute(query).to_arrow_table()

    def failing_rows(
        self, name: str, kind: str, kwargs: dict[str, Any], limit: int
    ) -> list[dict[str, Any]]:
        """From the table's Spark frame; a check's rows (one per session or table) are handed
        to Spark to be sampled the same way."""
        if name in CROSS_TABLE_SUITES:
            relation = self._arrow(f'SELECT * FROM "{name}"')
            return sample_rows(self.spark.createDataFrame(relation), kind, kwargs, limit)
        return sample_rows(self.tables[name], kind, kwargs, limit)

    def close(self) -> None:
        """Its connections closed, then its database removed."""
        if self.source is not None:
            self.source.get_execution_engine().engine.dispose()
        shutil.rmtree(self.folder, ignore_errors=True)


def _published_sessions(lake: Lake) -> list[str]:
    """Files of the lake's ``sessions`` snapshot (none before its first commit)."""
    path = lake.delta_path("sessions")
    delta = open_table(path)
    return [] if delta is None else snapshot_files(delta, path)


def _session_ids(frame: DataFrame | None) -> list[str]:
    if frame is None:
        return []
    return [row[0] for row in frame.select("session_id").collect() if row[0] is not None]
