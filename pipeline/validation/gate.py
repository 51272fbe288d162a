"""The validation gate: every batch passes its expectation suites before it is committed.

``validate_batch`` runs one GX suite per table on the batch's Spark DataFrames (or, given the
batch's files on this machine, on DuckDB: :mod:`pipeline.validation.local_sql`), plus two suites
on small cross-table check frames (see :mod:`pipeline.validation.checks`), builds Data Docs under
``<lake>/docs/``, writes the result to ``<lake>/_runs/<batch_id>/validation.json`` and, when an
expectation fails, quarantines the batch (its staged files moved, not rewritten) and raises
:class:`ValidationFailed`.

The suites judge the pipeline's output, never the traffic's behaviour: what a client or broker
does wrong on the wire is an anomaly row, and a batch full of it is committed.
"""

from __future__ import annotations

import json
import multiprocessing.synchronize  # noqa: F401  tqdm's lock (GX's progress), made by a suite thread
import os
import queue
import shutil
import time
import uuid
from collections import ChainMap
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import schemas
from pipeline.errors import StompLakeError
from pipeline.lake.commit import open_table
from pipeline.lake.layout import FILE_MODE, Lake, make_private_dir, make_tree_private, private_umask
from pipeline.lake.reader import read_table, snapshot_files
from pipeline.lake.staging import StagedBatch
from pipeline.lake.statefile import write_json_atomic
from pipeline.session.privacy import scrub, scrub_structure
from pipeline.validation import checks, local_sql
from pipeline.validation.docs_index import write_docs_index
from pipeline.validation.local_checks import CheckInputs
from pipeline.validation.quarantine import quarantine_batch
from pipeline.validation.results import ExpectationOutcome, outcomes_of
from pipeline.validation.suites import (
    CROSS_TABLE_SUITES,
    SUITE_NAMES,
    columns_used,
    load_suite,
    row_filters,
)
from pipeline.validation.templates import keep_compiled_templates

if TYPE_CHECKING:
    from great_expectations.data_context.store.store import DataDocsSiteConfigTypedDict
    from pyspark.sql import DataFrame, SparkSession

DOCS_SITE = "local_site"
SAMPLE_ROWS = 5
INDEX_COLUMNS = ("session_id", "frame_index")  # name the rows of a failed expectation
# Suites run side by side: their Spark jobs are small, and much of each one's cost is per query
# (planning, code generation and its JIT compilation) or GX's Python, which suites in flight
# overlap. On 2 cores (116 MB batch): 2 threads 15.0-15.2 s, 3 threads 13.6-13.8 s, 4 no better.
SUITE_THREADS = 3
DOCS_TEXT_SUFFIXES = (".html", ".json", ".js", ".txt", ".md")

T = TypeVar("T")


@dataclass(slots=True)
class ValidationReport:
    batch_id: str
    success: bool
    outcomes: list[ExpectationOutcome]
    elapsed_s: float
    docs_index: Path | None
    result_path: Path
    quarantine_path: Path | None = None
    timings_s: dict[str, float] = field(default_factory=dict)

    @property
    def failures(self) -> list[ExpectationOutcome]:
        return [o for o in self.outcomes if not o.success]

    def to_json(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "success": self.success,
            "elapsed_s": round(self.elapsed_s, 3),
            "timings_s": {k: round(v, 3) for k, v in self.timings_s.items()},
            "evaluated": len(self.outcomes),
            "failed": len(self.failures),
            "docs_index": None if self.docs_index is None else str(self.docs_index),
            "quarantine_path": None if self.quarantine_path is None else str(self.quarantine_path),
            "failures": [asdict(o) for o in self.failures],
            "outcomes": [
                {"suite": o.suite, "expectation": o.expectation, "success": o.success}
                for o in self.outcomes
            ],
        }

    def describe(self) -> str:
        head = (
            f"batch {self.batch_id}: {len(self.failures)} of {len(self.outcomes)} "
            f"expectations failed"
        )
        lines = [head]
        for failure in self.failures:
            lines.append(f"  - {failure.describe()}")
            lines.extend(f"      {json.dumps(row, default=str)}" for row in failure.samples)
        if self.quarantine_path is not None:
            lines.append(f"quarantined batch: {self.quarantine_path}")
        if self.docs_index is not None:
            lines.append(f"data docs: {self.docs_index}")
        lines.append(f"validation result: {self.result_path}")
        return "\n".join(lines)


class ValidationFailed(StompLakeError):
    exit_code = 4

    def __init__(self, report: ValidationReport) -> None:
        super().__init__(report.describe())
        self.report = report


def validate_batch(
    spark: SparkSession,
    lake: Lake,
    batch_id: str,
    tables: Mapping[str, DataFrame],
    counts: dict[str, Any],
    *,
    open_sessions: DataFrame | None = None,
    build_docs: bool = True,
    suite_done: Callable[[int, int], None] | None = None,
    local_files: Mapping[str, list[Path]] | None = None,
    staged: Mapping[str, StagedBatch] | None = None,
) -> ValidationReport:
    """Validate one batch; raises ValidationFailed after quarantining a failing batch.
    `suite_done(done, total)` is called as suites finish (progress).

    ``open_sessions`` (column ``session_id``): connections still open at the end of the batch,
    whose rows may precede their ``sessions`` row. Sessions already published count as known.

    ``local_files``: every table's Parquet files holding exactly the rows of ``tables``, on this
    machine. Every suite then runs on DuckDB: the tables' over those files, the cross-table
    ones over the same checks in SQL (:mod:`pipeline.validation.local_checks`); Spark makes
    the check frames only to sample the rows of a failed cross-table expectation.

    ``staged``: the tables whose rows are staged files (not committed); a failing batch has
    them moved into its quarantine, the other tables' frames written there.
    """
    started = time.monotonic()
    timings: dict[str, float] = {}
    missing = [t for t in schemas.TABLES if t not in tables]
    if missing:
        raise ValueError(f"validate_batch needs every table; missing {missing}")
    # The tables' frames, and the check frames once made, over ``tables`` (which may make a
    # frame only when it is asked for: `pipeline.lake.staged_tables.LazyFrames`). ChainMap
    # writes only to its first map, so ``tables`` need not be mutable.
    frames: MutableMapping[str, DataFrame] = ChainMap({}, tables)  # type: ignore[arg-type]

    def cross_table_frames() -> dict[str, DataFrame]:
        mark = time.monotonic()
        known = _known_sessions(spark, lake, open_sessions)
        found = {
            "session_consistency": checks.session_checks(
                tables, known, counts.get("capture_last_ns")
            ).cache(),
            "batch_consistency": checks.batch_checks(spark, tables, counts),
        }
        timings["checks"] = time.monotonic() - mark
        return found

    sql_folder = lake.runs_dir / batch_id / "duckdb"
    cross_table: Future[dict[str, DataFrame]] = Future()
    if local_files is None:
        # The cross-table checks are Spark jobs, GX's set-up is Python: each runs while the
        # other waits, and the tables' own suites start before the checks end. The checks
        # import nothing: all they need is imported with this module
        # (tests/pipeline/validation/test_preload.py checks that no two threads import at once).
        checks_thread = ThreadPoolExecutor(1, thread_name_prefix="validate-checks")
        cross_table = checks_thread.submit(cross_table_frames)
        checks_thread.shutdown(wait=False)  # its one task still runs
    else:
        cross_table.set_result({})  # the checks are relations of the DuckDB database
    mark = time.monotonic()
    context = _context(lake, batch_id)
    sql_source = None
    try:
        if local_files is None:
            runs = {t: _definition(context, t, frames[t]) for t in schemas.TABLES}
        else:
            inputs = CheckInputs(
                _published_sessions(lake),
                _session_ids(open_sessions),
                counts,
                counts.get("capture_last_ns"),
            )
            sql_source, runs = _sql_definitions(context, sql_folder, local_files, inputs)
        timings["gx_setup"] = time.monotonic() - mark
        batch = _Batch(
            spark, lake, batch_id, tables, counts, frames, timings, started, staged or {}
        )
        report = _validate(
            batch, context, runs, cross_table, cross_table_frames, build_docs, suite_done
        )
    finally:
        if sql_source is not None:  # its connections closed, then its database removed
            sql_source.get_execution_engine().engine.dispose()
        if local_files is not None:
            shutil.rmtree(sql_folder, ignore_errors=True)
    if not report.success:
        raise ValidationFailed(report)
    return report


@dataclass(frozen=True, slots=True)
class SuiteRun:
    """A suite's validation definition, and how its data is reached: on Spark, through its data
    source's execution engine (``spark_engine``, whose session each run sets); on DuckDB, the
    data source reads the relation, whose ``columns`` are given."""

    definition: Any
    spark_engine: Any = None
    columns: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Batch:
    """The batch `validate_batch` validates, as `_validate` goes on with it: its tables (and
    the frames the suites read, the check frames added once made), the run's counters, the
    timings and start of its validation, and its staged tables (moved if it is quarantined)."""

    spark: SparkSession
    lake: Lake
    batch_id: str
    tables: Mapping[str, DataFrame]
    counts: dict[str, Any]
    frames: MutableMapping[str, DataFrame]
    timings: dict[str, float]
    started: float
    staged: Mapping[str, StagedBatch]


def _validate(
    batch: _Batch,
    context: Any,
    runs: dict[str, SuiteRun],
    cross_table: Future[dict[str, DataFrame]],
    cross_table_frames: Callable[[], dict[str, DataFrame]],
    build_docs: bool,
    suite_done: Callable[[int, int], None] | None,
) -> ValidationReport:
    """`validate_batch` once the suites are defined: runs them, builds the docs, quarantines a
    failing batch and writes the result. On Spark the cross-table suites wait for
    ``cross_table``; on DuckDB they are defined already."""
    spark, lake, batch_id, tables = batch.spark, batch.lake, batch.batch_id, batch.tables
    counts, frames, timings = batch.counts, batch.frames, batch.timings
    on_spark = not all(name in runs for name in CROSS_TABLE_SUITES)
    held = CROSS_TABLE_SUITES if on_spark else ()

    def checks_done() -> None:
        if on_spark:
            frames.update(cross_table.result())
            for name in CROSS_TABLE_SUITES:
                runs[name] = _definition(context, name, frames[name])

    # GX's Spark engine runs `unexpected_rows_expectation` queries on a temp view it always names
    # `tmp_view`: each suite in flight gets a Spark session of its own (same context and cache)
    # so that suites can run side by side without reading each other's rows.
    sessions: queue.SimpleQueue[SparkSession] = queue.SimpleQueue()
    for _ in range(SUITE_THREADS):
        sessions.put(spark.newSession())
    global_views = spark.conf.get("spark.sql.globalTempDatabase", "global_temp")

    def run_suite(name: str) -> tuple[str, Any, float]:
        mark = time.monotonic()
        run = runs[name]
        definition, engine = run.definition, run.spark_engine
        if engine is None:  # on DuckDB: the data source reads the relation
            columns = list(run.columns)
            result = _run_suite(definition, None, columns, batch_id, detailed=False)
            if not result.success:
                result = _run_suite(definition, None, columns, batch_id, detailed=True)
            return name, result, time.monotonic() - mark
        # Only the columns the suite looks at (headers and bodies are most of a table). Not
        # cached: a suite reads its table in a few jobs (its aggregates in one, each query that
        # is more than a filter in one), and Parquet's column reads cost less than building a
        # cache would.
        frame = frames[name]
        used = columns_used(name, frame.columns)
        used += [k for k in INDEX_COLUMNS if k in frame.columns and k not in used]
        frame = frame.select(*used)
        view = f"stomp_lake_validate_{name}_{uuid.uuid4().hex}"
        frame.createGlobalTempView(view)
        session = sessions.get()
        session.sparkContext.setJobDescription(f"stomp-lake validate {batch_id} {name}")
        try:
            engine.spark = session
            own = session.table(f"{global_views}.{view}")
            data = {"dataframe": own}
            result = _run_suite(definition, data, own.columns, batch_id, detailed=False)
            if not result.success:  # again, with samples: cheap checks first, details on failure
                result = _run_suite(definition, data, own.columns, batch_id, detailed=True)
        finally:
            session.sparkContext.setJobDescription(None)  # type: ignore[arg-type]
            sessions.put(session)
            spark.catalog.dropGlobalTempView(view)
        return name, result, time.monotonic() - mark

    mark = time.monotonic()
    results = {}
    order = sorted(SUITE_NAMES, key=lambda name: -_expected_cost(name, counts))
    suites = _costliest_first(
        run_suite,
        order,
        SUITE_THREADS,
        held=held,
        until=cross_table,
        then=checks_done,
    )
    for name, result, seconds in suites:
        results[name] = result
        timings[name] = seconds
        if suite_done is not None:
            suite_done(len(results), len(order))
    timings["suites"] = time.monotonic() - mark
    docs_index = None
    if build_docs:
        mark = time.monotonic()
        with private_umask():
            context.build_data_docs(site_names=[DOCS_SITE])
        scrub_docs(lake.docs_dir / batch_id)
        docs_index = lake.docs_dir / batch_id / "index.html"
        timings["data_docs"] = time.monotonic() - mark

    if any(name not in frames and not results[name].success for name in CROSS_TABLE_SUITES):
        frames.update(cross_table_frames())  # on DuckDB: Spark's check frames, for samples
    outcomes = [
        outcome
        for name in SUITE_NAMES
        for outcome in outcomes_of(
            name, results[name], SAMPLE_ROWS, None if results[name].success else frames.get(name)
        )
    ]
    for outcome in outcomes:  # printed, and saved in validation.json and the quarantine
        outcome.samples = scrub_structure(outcome.samples)
    if "session_consistency" in frames:
        frames["session_consistency"].unpersist()
    run_dir = make_private_dir(lake.runs_dir / batch_id)
    report = ValidationReport(
        batch_id=batch_id,
        success=all(o.success for o in outcomes),
        outcomes=outcomes,
        elapsed_s=0.0,
        docs_index=docs_index,
        result_path=run_dir / "validation.json",
        timings_s=timings,
    )
    if not report.success:
        mark = time.monotonic()
        report.quarantine_path = quarantine_batch(
            lake, batch_id, tables, report.to_json(), batch.staged
        )
        timings["quarantine"] = time.monotonic() - mark
    report.elapsed_s = time.monotonic() - batch.started
    write_json_atomic(report.result_path, report.to_json())
    if build_docs:
        with private_umask():
            index = write_docs_index(lake)
        os.chmod(index, FILE_MODE)  # it may predate private modes
    return report


def scrub_docs(folder: Path) -> None:
    """Data Docs as GX rendered them, with passcodes spelled out in them masked and private
    modes (the tables are masked already: this is for values that reach GX some other way)."""
    for path in folder.rglob("*"):
        if path.is_file() and path.suffix in DOCS_TEXT_SUFFIXES:
            text = path.read_text(encoding="utf-8", errors="surrogateescape")
            clean = scrub(text)
            if clean != text:
                path.write_text(clean, encoding="utf-8", errors="surrogateescape")
    make_tree_private(folder)


def _known_sessions(spark: SparkSession, lake: Lake, open_sessions: DataFrame | None) -> DataFrame:
    schema = schemas.load("sessions").spark_schema()
    known = read_table(spark, lake, "sessions", schema=schema).select("session_id")
    if open_sessions is not None:
        known = known.unionByName(open_sessions.select("session_id"))
    return known


def _context(lake: Lake, batch_id: str) -> Any:
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    keep_compiled_templates()  # of the data docs: compiled once per install
    context = gx.get_context(mode="ephemeral")
    # GX documents an ephemeral context's configuration as not saved, yet it writes the whole
    # of it as YAML into its in-memory store at each data source, asset and suite added (33
    # times a batch, each longer than the last: 0.27 s of the 0.86 s set-up on 0.58 GB). Nothing
    # reads that copy back: the context keeps its configuration as objects.
    context._save_project_config = lambda: None  # type: ignore[method-assign]
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    docs = make_private_dir(lake.docs_dir / batch_id)
    sites = context.variables.data_docs_sites
    assert sites is not None  # an ephemeral context is made with the default local site
    site = cast("DataDocsSiteConfigTypedDict", dict(sites[DOCS_SITE]))
    site["store_backend"] = {
        "class_name": "TupleFilesystemStoreBackend",
        "base_directory": str(docs),
    }
    context.update_data_docs_site(DOCS_SITE, site)
    return context


def _definition(context: Any, name: str, frame: DataFrame) -> SuiteRun:
    """The suite's validation definition and its data source's execution engine (whose Spark
    session the caller sets). The engine persists no frame (see ``run_suite``)."""
    import great_expectations as gx

    source = context.data_sources.add_spark(f"{name}_source", persist=False)
    batch = source.add_dataframe_asset(name).add_batch_definition_whole_dataframe("batch")
    resolved = _resolved_on(frame, row_filters(name))
    suite = context.suites.add(load_suite(name, counted=True, foldable=resolved.__contains__))
    definition = context.validation_definitions.add(
        gx.ValidationDefinition(name=name, data=batch, suite=suite)
    )
    return SuiteRun(definition, spark_engine=source.get_execution_engine())


def _sql_definitions(
    context: Any, folder: Path, files: Mapping[str, list[Path]], inputs: CheckInputs
) -> tuple[Any, dict[str, SuiteRun]]:
    """The DuckDB data source (:mod:`local_sql`) and every suite on it: the tables' over their
    files, the cross-table suites over the checks' relations."""
    import great_expectations as gx

    make_private_dir(folder)
    filters = {t: row_filters(t) for t in schemas.TABLES}
    database = local_sql.create_database(folder, files, inputs, filters)
    source = context.data_sources.add_sql(
        "batch_tables",
        connection_string=local_sql.connection_string(database.path),
        kwargs=local_sql.engine_options(folder),
    )
    local_sql.buffered_results(source.get_execution_engine())
    local_sql.reflected_once(source.get_execution_engine().engine)
    runs: dict[str, SuiteRun] = {}
    for name in SUITE_NAMES:

        def foldable(
            condition: str, unresolved: frozenset[str] = database.unbound.get(name, frozenset())
        ) -> bool:
            return condition not in unresolved

        asset = source.add_table_asset(name, table_name=name)
        batch = asset.add_batch_definition_whole_table("batch")
        suite = context.suites.add(load_suite(name, counted=True, foldable=foldable))
        definition = context.validation_definitions.add(
            gx.ValidationDefinition(name=name, data=batch, suite=suite)
        )
        runs[name] = SuiteRun(definition, columns=database.columns[name])
    return source, runs


def _published_sessions(lake: Lake) -> list[str]:
    """Files of the lake's ``sessions`` snapshot (none before its first commit)."""
    path = lake.delta_path("sessions")
    delta = open_table(path)
    return [] if delta is None else snapshot_files(delta, path)


def _session_ids(frame: DataFrame | None) -> list[str]:
    if frame is None:
        return []
    return [row[0] for row in frame.select("session_id").collect() if row[0] is not None]


def _resolved_on(frame: DataFrame, conditions: list[str]) -> frozenset[str]:
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


def _costliest_first(
    run: Callable[[str], T],
    order: list[str],
    threads: int,
    *,
    held: tuple[str, ...],
    until: Future[Any],
    then: Callable[[], None],
) -> Iterator[T]:
    """``run`` of every name, on ``threads`` threads, each thread taking the first name of
    ``order`` it may run; results as they come. The ``held`` names may run once ``until`` is
    done and ``then()`` (called here) has returned."""
    pending = list(order)
    running: set[Future[T]] = set()
    released = False
    with ThreadPoolExecutor(threads, thread_name_prefix="validate") as pool:
        while pending or running:
            if not released and until.done():
                then()
                released = True
            for name in [n for n in pending if released or n not in held]:
                if len(running) == threads:
                    break
                pending.remove(name)
                running.add(pool.submit(run, name))
            watched: set[Future[Any]] = set(running) if released else {*running, until}
            done, _ = wait_for(watched, return_when=FIRST_COMPLETED)
            for future in done & running:
                running.remove(future)
                yield future.result()


def _expected_cost(name: str, counts: dict[str, Any]) -> int:
    """Rows a suite reads, to start the longest suites first (the session checks aggregate
    the frames)."""
    rows = counts.get("frames" if name == "session_consistency" else name)
    return rows if isinstance(rows, int) else 0


def _run_suite(
    definition: Any,
    batch_parameters: dict[str, Any] | None,
    columns: list[str],
    batch_id: str,
    *,
    detailed: bool,
) -> Any:
    from great_expectations.core.run_identifier import RunIdentifier

    result_format: dict[str, Any] = {"result_format": "BOOLEAN_ONLY"}
    if detailed:
        result_format = {"result_format": "SUMMARY", "partial_unexpected_count": SAMPLE_ROWS}
        keys = [k for k in INDEX_COLUMNS if k in columns]
        if keys:
            result_format["unexpected_index_column_names"] = keys
    return definition.run(
        batch_parameters=batch_parameters,
        result_format=result_format,
        run_id=RunIdentifier(run_name=batch_id),
    )
