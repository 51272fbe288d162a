"""The validation gate: every batch passes its expectation suites before it is committed.

``validate_batch`` runs one GX suite per table, plus two suites on the cross-table checks
(:mod:`pipeline.validation.checks`), on an engine (:mod:`pipeline.validation.engine`: Spark
over the batch's frames, or DuckDB over its files on this machine); builds Data Docs under
``<lake>/docs/``, writes the result to ``<lake>/_runs/<batch_id>/validation.json`` and, when an
expectation fails, quarantines the batch (its staged files moved, not rewritten) and raises
:class:`ValidationFailed`.

The suites judge the pipeline's output, never the traffic's behaviour: what a client or broker
does wrong on the wire is an anomaly row, and a batch full of it is committed.
"""

from __future__ import annotations

import multiprocessing.synchronize  # noqa: F401  tqdm's lock (GX's progress), made by a suite thread
import os
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

import schemas
from pipeline.lake.layout import FILE_MODE, Lake, make_private_dir, private_umask
from pipeline.lake.staging import StagedBatch
from pipeline.lake.statefile import write_json_atomic
from pipeline.session.privacy import scrub_structure
from pipeline.validation import gx_context
from pipeline.validation.docs_index import write_docs_index
from pipeline.validation.engine import SuiteEngine, open_engine
from pipeline.validation.quarantine import quarantine_batch
from pipeline.validation.report import ValidationFailed, ValidationReport
from pipeline.validation.results import ExpectationOutcome, outcomes_of
from pipeline.validation.scheduling import SUITE_THREADS, costliest_first, expected_cost
from pipeline.validation.suites import CROSS_TABLE_SUITES, SUITE_NAMES

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["ValidationFailed", "ValidationReport", "validate_batch"]


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

    ``tables`` may make a frame only when it is asked for
    (`pipeline.lake.staged_tables.LazyFrames`).

    ``open_sessions`` (column ``session_id``): connections still open at the end of the batch,
    whose rows may precede their ``sessions`` row. Sessions already published count as known.

    ``local_files``: every table's Parquet files holding exactly the rows of ``tables``, on this
    machine. Every suite then runs on DuckDB over those files.

    ``staged``: the tables whose rows are staged files (not committed); a failing batch has
    them moved into its quarantine, the other tables' frames written there.
    """
    started = time.monotonic()
    missing = [t for t in schemas.TABLES if t not in tables]
    if missing:
        raise ValueError(f"validate_batch needs every table; missing {missing}")
    timings: dict[str, float] = {}
    engine = open_engine(
        spark, lake, batch_id, tables, counts, open_sessions=open_sessions, local_files=local_files
    )
    try:
        checks = engine.start_checks()
        mark = time.monotonic()
        context = gx_context.new_context(lake, batch_id)
        engine.define(context, schemas.TABLES)
        timings["gx_setup"] = time.monotonic() - mark

        def define_checks() -> None:
            timings["checks"] = checks.result()
            engine.define(context, CROSS_TABLE_SUITES)

        results = _run_suites(engine, counts, checks, define_checks, timings, suite_done)
        docs_index = None
        if build_docs:
            mark = time.monotonic()
            docs_index = gx_context.build_docs(context, lake, batch_id)
            timings["data_docs"] = time.monotonic() - mark
        outcomes = _outcomes(engine, results)
    finally:
        engine.close()
    report = ValidationReport(
        batch_id=batch_id,
        success=all(o.success for o in outcomes),
        outcomes=outcomes,
        elapsed_s=0.0,
        docs_index=docs_index,
        result_path=make_private_dir(lake.runs_dir / batch_id) / "validation.json",
        timings_s=timings,
    )
    if not report.success:
        mark = time.monotonic()
        report.quarantine_path = quarantine_batch(
            lake, batch_id, tables, report.to_json(), staged or {}
        )
        timings["quarantine"] = time.monotonic() - mark
    report.elapsed_s = time.monotonic() - started
    write_json_atomic(report.result_path, report.to_json())
    if build_docs:
        with private_umask():
            index = write_docs_index(lake)
        os.chmod(index, FILE_MODE)  # it may predate private modes
    if not report.success:
        raise ValidationFailed(report)
    return report


def _run_suites(
    engine: SuiteEngine,
    counts: dict[str, Any],
    checks: Future[float],
    define_checks: Callable[[], None],
    timings: dict[str, float],
    suite_done: Callable[[int, int], None] | None,
) -> dict[str, Any]:
    """Every suite's result, the costliest suites first; the cross-table suites once the
    checks are made (``define_checks`` defines them)."""

    def run(name: str) -> tuple[str, Any, float]:
        mark = time.monotonic()
        result = engine.run_suite(name, detailed=False)
        if not result.success:  # again, with samples: cheap checks first, details on failure
            result = engine.run_suite(name, detailed=True)
        return name, result, time.monotonic() - mark

    mark = time.monotonic()
    results: dict[str, Any] = {}
    order = sorted(SUITE_NAMES, key=lambda name: -expected_cost(name, counts))
    suites = costliest_first(
        run, order, SUITE_THREADS, held=CROSS_TABLE_SUITES, until=checks, then=define_checks
    )
    for name, result, seconds in suites:
        results[name] = result
        timings[name] = seconds
        if suite_done is not None:
            suite_done(len(results), len(order))
    timings["suites"] = time.monotonic() - mark
    return results


def _outcomes(engine: SuiteEngine, results: dict[str, Any]) -> list[ExpectationOutcome]:
    """Every expectation's outcome, failures with sample rows (scrubbed: they are printed, and
    saved in validation.json and the quarantine)."""
    outcomes = []
    for name in SUITE_NAMES:

        def sampler(kind: str, kwargs: dict[str, Any], limit: int, name: str = name) -> list[Any]:
            return engine.failing_rows(name, kind, kwargs, limit)

        outcomes.extend(outcomes_of(name, results[name], gx_context.SAMPLE_ROWS, sampler))
    for outcome in outcomes:
        outcome.samples = scrub_structure(outcome.samples)
    return outcomes
