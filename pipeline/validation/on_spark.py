"""The suites on Spark (:class:`SparkEngine`): GX's Spark engine over the batch's frames, the
cross-table checks as Spark SQL over the same frames."""

from __future__ import annotations

import queue
import time
import uuid
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import schemas
from pipeline.lake.layout import Lake
from pipeline.lake.reader import local_frame, read_table
from pipeline.validation.checks import KNOWN_SESSIONS, check_queries
from pipeline.validation.expectations import load_counted_suite
from pipeline.validation.gx_context import INDEX_COLUMNS, add_definition, run_definition
from pipeline.validation.samples import sample_rows
from pipeline.validation.scheduling import SUITE_THREADS
from pipeline.validation.suites import columns_used, row_filters

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# Checks computed on the checks' thread while GX is set up: a row per table, where their suite's
# queries would each read every table again (2 cores, samples: 1.4-1.6 s for the suite, not 8).
COMPUTED_NOW = ("batch_consistency",)


@dataclass(frozen=True, slots=True)
class _Suite:
    """A suite's validation definition and its data source's execution engine, whose Spark
    session each run sets."""

    definition: Any
    engine: Any


class SparkEngine:
    def __init__(
        self,
        spark: SparkSession,
        lake: Lake,
        batch_id: str,
        tables: Mapping[str, DataFrame],
        counts: Mapping[str, Any],
        open_sessions: DataFrame | None,
    ) -> None:
        self.spark, self.lake, self.batch_id = spark, lake, batch_id
        self.tables, self.counts, self.open_sessions = tables, counts, open_sessions
        self.checks: dict[str, DataFrame] = {}
        self.suites: dict[str, _Suite] = {}
        self._checks_done: Future[float] | None = None
        # GX's Spark engine runs `unexpected_rows_expectation` queries on a temp view it always
        # names `tmp_view`: each suite in flight gets a Spark session of its own (same context
        # and cache) so that suites can run side by side without reading each other's rows.
        self._sessions: queue.SimpleQueue[SparkSession] = queue.SimpleQueue()
        for _ in range(SUITE_THREADS):
            self._sessions.put(spark.newSession())

    def start_checks(self) -> Future[float]:
        """The checks' frames are made on a thread: planning them is Spark's work, GX's set-up
        is Python, and each runs while the other waits. They import nothing: all they need is
        imported with this module (tests/pipeline/startup/test_preload.py checks that no two
        threads import at once). The batch checks (a row per table) are computed here, held in
        the JVM; the session checks are cached, computed by their suite's first query."""
        thread = ThreadPoolExecutor(1, thread_name_prefix="validate-checks")
        self._checks_done = thread.submit(self._make_checks)
        thread.shutdown(wait=False)  # its one task still runs
        return self._checks_done

    def _make_checks(self) -> float:
        mark = time.monotonic()
        relations = {**self._relations(), KNOWN_SESSIONS: self._known_sessions()}
        for name, query in check_queries(self.counts).items():
            frame = self.spark.sql(query, None, **relations)
            if name in COMPUTED_NOW:
                frame = local_frame(self.spark, [tuple(r) for r in frame.collect()], frame.schema)
            self.checks[name] = frame if name in COMPUTED_NOW else frame.cache()
        return time.monotonic() - mark

    def _relations(self) -> dict[str, DataFrame]:
        return {**{t: self.tables[t] for t in schemas.TABLES}, **self.checks}

    def _known_sessions(self) -> DataFrame:
        schema = schemas.load("sessions").spark_schema()
        known = read_table(self.spark, self.lake, "sessions", schema=schema).select("session_id")
        if self.open_sessions is not None:
            known = known.unionByName(self.open_sessions.select("session_id"))
        return known

    def _frame(self, name: str) -> DataFrame:
        return self.checks[name] if name in self.checks else self.tables[name]

    def define(self, context: Any, names: Iterable[str]) -> None:
        """The engine persists no frame (see :meth:`run_suite`)."""
        for name in names:
            source = context.data_sources.add_spark(f"{name}_source", persist=False)
            batch = source.add_dataframe_asset(name).add_batch_definition_whole_dataframe("batch")
            resolved = resolved_on(self._frame(name), row_filters(name))
            suite = load_counted_suite(name, foldable=resolved.__contains__)
            definition = add_definition(context, name, batch, suite)
            self.suites[name] = _Suite(definition, source.get_execution_engine())

    def run_suite(self, name: str, *, detailed: bool) -> Any:
        # Only the columns the suite looks at (headers and bodies are most of a table). Not
        # cached: a suite reads its table in a few jobs (its aggregates in one, each query that
        # is more than a filter in one), and Parquet's column reads cost less than building a
        # cache would.
        suite, frame = self.suites[name], self._frame(name)
        used = columns_used(name, frame.columns)
        used += [k for k in INDEX_COLUMNS if k in frame.columns and k not in used]
        view = f"stomp_lake_validate_{name}_{uuid.uuid4().hex}"
        frame.select(*used).createGlobalTempView(view)
        global_views = self.spark.conf.get("spark.sql.globalTempDatabase", "global_temp")
        session = self._sessions.get()
        session.sparkContext.setJobDescription(f"stomp-lake validate {self.batch_id} {name}")
        try:
            suite.engine.spark = session
            own = session.table(f"{global_views}.{view}")
            data = {"dataframe": own}
            return run_definition(
                suite.definition, data, own.columns, self.batch_id, detailed=detailed
            )
        finally:
            session.sparkContext.setJobDescription(None)  # type: ignore[arg-type]
            self._sessions.put(session)
            self.spark.catalog.dropGlobalTempView(view)

    def rows(self, query: str) -> list[dict[str, Any]]:
        relations = {**self._relations(), KNOWN_SESSIONS: self._known_sessions()}
        found = self.spark.sql(query, None, **relations).collect()
        return [row.asDict(recursive=True) for row in found]

    def failing_rows(
        self, name: str, kind: str, kwargs: dict[str, Any], limit: int
    ) -> list[dict[str, Any]]:
        return sample_rows(self._frame(name), kind, kwargs, limit)

    def close(self) -> None:
        if self._checks_done is not None:
            self._checks_done.exception()  # waits for the frames; the gate reports an error
        for frame in self.checks.values():
            frame.unpersist()


def resolved_on(frame: DataFrame, conditions: list[str]) -> frozenset[str]:
    """The row filters' conditions that Spark resolves on ``frame`` (analysis only, no job): a
    filter that does not stays a query of its own, so that its error is reported on it alone,
    not on every aggregate computed with it. All are analysed in one query (one at a time took
    0.34 s of GX's set-up on a batch's 30 filters), and one by one only when that one fails."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    def resolve(some: list[str]) -> bool:
        try:
            frame.select(*(F.count(F.when(F.expr(c), F.lit(1))) for c in some))
        except AnalysisException:
            return False
        return True

    if not conditions or resolve(conditions):
        return frozenset(conditions)
    return frozenset(c for c in conditions if resolve([c]))
