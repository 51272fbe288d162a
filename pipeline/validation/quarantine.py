"""Batches that failed validation, kept aside under ``<lake>/_quarantine/<batch_id>/``.

Each quarantined batch holds one folder per table and ``report.json`` (which expectations
failed, with sample rows). A table's staged files are moved there as they are, a rename each
(seconds whatever the batch's size), with their record; a table that was a computed frame (Delta's
Spark jars) is written there by Spark. Nothing there is visible through the tables;
``release_batch`` commits a batch after review (moved files go back under the table root and are
committed as staged) and marks it released.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import schemas
from pipeline.errors import StompLakeError, UsageError
from pipeline.lake.commit import app_id_for, batch_committed, open_table
from pipeline.lake.layout import Lake, make_private_dir, make_tree_private
from pipeline.lake.staging import StagedBatch, move_staged, moved_batch, restore_staged
from pipeline.lake.statefile import read_json, write_json_atomic

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

REPORT = "report.json"
RELEASED = "released.json"


class NotQuarantined(LookupError, UsageError):
    pass


class BatchQuarantined(RuntimeError, StompLakeError):
    """A run was asked for a batch that failed validation earlier and awaits review."""

    exit_code = 4

    def __init__(self, lake: Lake, batch_id: str) -> None:
        super().__init__(
            f"batch {batch_id} failed validation earlier and is quarantined under "
            f"{batch_dir(lake, batch_id)}; see its report.json, then release or discard it"
        )
        self.batch_id = batch_id


@dataclass(slots=True, frozen=True)
class QuarantinedBatch:
    batch_id: str
    path: Path
    quarantined_at: str | None
    failed: tuple[str, ...]  # "suite: expectation" of each failure
    released_at: str | None

    @property
    def released(self) -> bool:
        return self.released_at is not None


def batch_dir(lake: Lake, batch_id: str) -> Path:
    return lake.quarantine_dir / batch_id


def quarantine_batch(
    lake: Lake,
    batch_id: str,
    tables: Mapping[str, DataFrame],
    report: dict[str, Any],
    staged: Mapping[str, StagedBatch] | None = None,
) -> Path:
    """Keep every table of the batch aside, then the report (last: it marks completeness).
    The ``staged`` tables' files are moved (and no longer staged); the others' frames are
    written as Parquet."""
    folder = make_private_dir(batch_dir(lake, batch_id))
    (folder / REPORT).unlink(missing_ok=True)
    staged = staged or {}
    for table in tables:  # by name: a staged table's frame is never made (lazy frames)
        if table in staged:
            move_staged(staged[table], folder / table)
            continue
        tables[table].write.mode("overwrite").parquet(str(folder / table))
        make_tree_private(folder / table)  # written by the JVM, with its own umask
    stamped = {**report, "quarantined_at": _now()}
    write_json_atomic(folder / REPORT, stamped)
    return folder


def is_quarantined(lake: Lake, batch_id: str) -> bool:
    """Quarantined and neither released nor discarded."""
    folder = batch_dir(lake, batch_id)
    return read_json(folder / REPORT) is not None and read_json(folder / RELEASED) is None


def list_quarantined(lake: Lake) -> list[QuarantinedBatch]:
    if not lake.quarantine_dir.is_dir():
        return []
    found = []
    for folder in sorted(lake.quarantine_dir.iterdir()):
        report = read_json(folder / REPORT) if folder.is_dir() else None
        if report is None:
            continue  # not a batch, or one still being written
        released = read_json(folder / RELEASED)
        failed = tuple(f"{f['suite']}: {f['expectation']}" for f in report.get("failures", []))
        found.append(
            QuarantinedBatch(
                batch_id=folder.name,
                path=folder,
                quarantined_at=report.get("quarantined_at"),
                failed=failed,
                released_at=None if released is None else released.get("released_at"),
            )
        )
    return found


def release(lake: Lake, batch_id: str) -> dict[str, Path]:
    """The Parquet folder of each table of a quarantined batch, ready to be committed."""
    folder = batch_dir(lake, batch_id)
    if read_json(folder / REPORT) is None:
        raise NotQuarantined(f"no quarantined batch {batch_id!r} under {lake.quarantine_dir}")
    return {t: folder / t for t in schemas.TABLES if (folder / t).is_dir()}


def read_quarantined(spark: SparkSession, path: Path, table: str) -> DataFrame:
    """A table of a quarantined batch that Spark wrote there (not moved files)."""
    return spark.read.schema(schemas.load(table).spark_schema()).parquet(str(path))


def release_batch(lake: Lake, batch_id: str, spark: Callable[[], SparkSession]) -> dict[str, int]:
    """Commit a quarantined batch's tables (idempotent per table); returns table -> version.
    Moved files are committed where they are put back, with no Spark; ``spark()`` is called only
    for a table Spark wrote into the quarantine.

    The caller holds ``lake_lock``. Ledger and carried state are the caller's to record.
    """
    from pipeline.lake.writer import commit_staged

    versions = {}
    for table, path in release(lake, batch_id).items():
        staged = moved_batch(path, lake.table_path(table))
        if staged is None:
            versions[table] = _write_quarantined(spark(), lake, batch_id, table, path)
            continue
        existing = open_table(staged.table_path)
        if existing is not None and batch_committed(
            existing, app_id_for(table), staged.seq, batch_id
        ):
            shutil.rmtree(path, ignore_errors=True)  # committed by an attempt that stopped
            versions[table] = existing.version()
            continue
        restore_staged(staged)
        versions[table] = commit_staged(staged).version
    write_json_atomic(batch_dir(lake, batch_id) / RELEASED, {"released_at": _now()})
    return versions


def _write_quarantined(
    spark: SparkSession, lake: Lake, batch_id: str, table: str, path: Path
) -> int:
    from pipeline.lake.staged_tables import table_layout
    from pipeline.lake.writer import write_table_batch

    frame = read_quarantined(spark, path, table)
    return write_table_batch(frame, lake, table, batch_id=batch_id, **table_layout(table)).version


def discard(lake: Lake, batch_id: str) -> None:
    shutil.rmtree(batch_dir(lake, batch_id), ignore_errors=True)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
