"""Where a batch's suites run: the interface the gate (:mod:`pipeline.validation.gate`) drives,
and the one place an engine is chosen.

- :class:`pipeline.validation.on_spark.SparkEngine`: GX's Spark engine on the batch's frames,
  the cross-table checks as Spark SQL over them;
- :class:`pipeline.validation.on_duckdb.DuckDbEngine`: GX's SQL engine on DuckDB over the
  batch's files on this machine (:mod:`pipeline.validation.local_sql`), the cross-table checks
  as tables of that database.

Both run the same suites and the same check queries (:mod:`pipeline.validation.checks`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pipeline.lake.layout import Lake
from pipeline.validation.on_duckdb import DuckDbEngine
from pipeline.validation.on_spark import SparkEngine

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class SuiteEngine(Protocol):
    def start_checks(self) -> Future[float]:
        """Starts making the cross-table checks' relations; done (with the seconds it took)
        once their suites can be defined."""

    def define(self, context: Any, names: Iterable[str]) -> None:
        """Adds the named suites, over their relations, to the GX ``context``."""

    def run_suite(self, name: str, *, detailed: bool) -> Any:
        """The GX validation result of a defined suite; ``detailed``: with sample values."""

    def rows(self, query: str) -> list[dict[str, Any]]:
        """The rows of an SQL query naming the batch's relations as ``{name}`` fields (the
        tables, ``known_sessions``, and the checks once made)."""

    def failing_rows(
        self, name: str, kind: str, kwargs: dict[str, Any], limit: int
    ) -> list[dict[str, Any]]:
        """Up to ``limit`` rows of the suite's relation that break an expectation of type
        ``kind`` with arguments ``kwargs``."""

    def close(self) -> None:
        """Lets go of what the engine holds (cached frames, its database)."""


def open_engine(
    spark: SparkSession,
    lake: Lake,
    batch_id: str,
    tables: Mapping[str, DataFrame],
    counts: Mapping[str, Any],
    *,
    open_sessions: DataFrame | None = None,
    local_files: Mapping[str, list[Path]] | None = None,
) -> SuiteEngine:
    """DuckDB when the batch's files are on this machine (``local_files``), else Spark."""
    if local_files is not None:
        return DuckDbEngine(spark, lake, batch_id, tables, counts, open_sessions, local_files)
    return SparkEngine(spark, lake, batch_id, tables, counts, open_sessions)
