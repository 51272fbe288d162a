"""Batches that failed validation, kept aside under ``<lake>/_quarantine/<batch_id>/``.

Each quarantined batch holds one Parquet folder per table and ``report.json`` (which expectations
failed, with sample rows). Nothing there is visible through the tables; ``release_batch`` commits
a batch after review and marks it released.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import schemas
from pipeline.errors import StompLakeError, UsageError
from pipeline.lake.layout import Lake, make_private_dir, make_tree_private
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
    lake: Lake, batch_id: str, tables: Mapping[str, DataFrame], report: dict[str, Any]
) -> Path:
    """Write every table of the batch as Parquet, then the report (last: it marks completeness)."""
    folder = make_private_dir(batch_dir(lake, batch_id))
    (folder / REPORT).unlink(missing_ok=True)
    for table, frame in tables.items():
        frame.write.mode("overwrite").parquet(str(folder / table))
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


def read_quarantined(spark: SparkSession, lake: Lake, batch_id: str) -> dict[str, DataFrame]:
    return {
        table: spark.read.schema(schemas.load(table).spark_schema()).parquet(str(path))
        for table, path in release(lake, batch_id).items()
    }


def release_batch(spark: SparkSession, lake: Lake, batch_id: str) -> dict[str, int]:
    """Commit a quarantined batch's tables (idempotent per table); returns table -> version.

    The caller holds ``lake_lock``. Ledger and carried state are the caller's to record.
    """
    from pipeline.lake.staged_tables import table_layout
    from pipeline.lake.writer import write_table_batch

    versions = {}
    for table, frame in read_quarantined(spark, lake, batch_id).items():
        written = write_table_batch(frame, lake, table, batch_id=batch_id, **table_layout(table))
        versions[table] = written.version
    write_json_atomic(batch_dir(lake, batch_id) / RELEASED, {"released_at": _now()})
    return versions


def discard(lake: Lake, batch_id: str) -> None:
    shutil.rmtree(batch_dir(lake, batch_id), ignore_errors=True)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
