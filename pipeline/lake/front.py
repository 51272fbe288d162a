"""The lake's front door: one object for a batch's life, from the lock to the end mark.

A run opens the lake (`LakeFront.open`: the lock, then the integrity check), finds its batch
(`pending`, `scan`, `begin`), stages what the flow pass wrote (`clean_up`, `table_folders`,
`carried_state`, `stage`), hands the staged tables to validation, and ends the batch one of two
ways: `commit`, or `set_aside` when validation quarantined it. Both write the connections left
open, then record the files in the ledger, move the state pointer and clear the pending mark, in
that order, so a run killed anywhere can simply be run again. Which module of `pipeline.lake`
does each step is this class's business, not the runner's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.lake import carried
from pipeline.lake.batches import PendingBatch, begin_batch, finish_batch, pending_batch
from pipeline.lake.failpoints import failpoint
from pipeline.lake.fingerprint import FileFingerprint
from pipeline.lake.integrity import ensure_intact
from pipeline.lake.layout import Lake
from pipeline.lake.ledger import Ledger, LedgerScan
from pipeline.lake.lock import lake_lock
from pipeline.lake.orphans import cleanup_lake
from pipeline.lake.staged_tables import (
    StagedTables,
    commit_tables,
    discard_tables,
    stage_written,
    staging_folders,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class LakeFront:
    """The lake as one batch's run sees it, while it holds the lake's lock."""

    def __init__(self, lake: Lake) -> None:
        self.lake = lake
        self.ledger = Ledger(lake)

    @classmethod
    @contextmanager
    def open(cls, root: Path, *, wait_lock: float = 0.0) -> Iterator[LakeFront]:
        """The lake at ``root`` (made if new), locked, and checked intact before anything reads
        or writes its state (`pipeline.lake.integrity`)."""
        lake = Lake(root).ensure()
        with lake_lock(lake, wait=wait_lock):
            ensure_intact(lake)
            yield cls(lake)

    # -- which batch -------------------------------------------------------------------------

    def pending(self) -> PendingBatch | None:
        """The batch an earlier run began and did not finish."""
        return pending_batch(self.lake)

    def scan(
        self, captures: Iterable[str | Path], on_first_unseen: Callable[[], None] | None = None
    ) -> LedgerScan:
        """The capture files sorted by what the ledger knows of them (`Ledger.scan`)."""
        return self.ledger.scan(captures, on_first_unseen=on_first_unseen)

    def begin(self, files: Iterable[FileFingerprint], batch_id: str | None) -> PendingBatch:
        batch = begin_batch(self.lake, tuple(files), batch_id=batch_id)
        failpoint("run.batch_begun")
        return batch

    def complete_but_for_its_mark(self, batch: PendingBatch) -> bool:
        """Whether the pending ``batch`` was committed and recorded by a run killed before its
        last step; if so, the step is taken now."""
        if carried.current_state_batch(self.lake) != batch.batch_id:
            return False
        finish_batch(self.lake, batch.batch_id)
        return True

    # -- staging -----------------------------------------------------------------------------

    def clean_up(self) -> dict[str, int]:
        """What earlier runs left that no commit references (`pipeline.lake.orphans`)."""
        return cleanup_lake(self.lake)

    def table_folders(self, batch: PendingBatch, tables: Iterable[str]) -> dict[str, Path]:
        """A new staging folder per table, for the flow pass's tasks to write into."""
        return staging_folders(self.lake, batch.batch_id, tuple(tables))

    def carried_state(self, spark: SparkSession) -> DataFrame | None:
        """The connections the last batch left open."""
        return carried.read_carried(spark, self.lake)

    def stage(
        self,
        spark: SparkSession,
        batch: PendingBatch,
        folders: dict[str, Path],
        written: dict[str, list[str]],
        *,
        read_now: bool,
    ) -> StagedTables:
        return stage_written(spark, self.lake, batch.batch_id, folders, written, read_now=read_now)

    # -- the end of a batch ------------------------------------------------------------------

    def commit(
        self,
        staged: StagedTables,
        batch: PendingBatch,
        carried_rows: DataFrame | None,
        committed: Callable[[int, int], None] | None = None,
    ) -> dict[str, int]:
        """Commit every staged table, after the connections left open (``carried_rows``, None
        when none is) are written; returns table -> version."""
        self._write_carried(batch, carried_rows)
        versions = commit_tables(staged, committed)
        self._finish(batch)
        return versions

    def set_aside(
        self, staged: StagedTables, batch: PendingBatch, carried_rows: DataFrame | None
    ) -> None:
        """End a quarantined batch: nothing committed (the quarantine holds its tables), but its
        files and open connections move on, so later batches are not held up by it."""
        discard_tables(staged)
        self._write_carried(batch, carried_rows)
        self._finish(batch)

    def _write_carried(self, batch: PendingBatch, carried_rows: DataFrame | None) -> None:
        """Read only once the state pointer names the batch: written again by a re-run, never
        half read."""
        carried.write_carried(carried_rows, self.lake, batch.batch_id)
        failpoint("run.carried_written")

    def _finish(self, batch: PendingBatch) -> None:
        """Ledger, state pointer, end mark (the carried state written before): in this order, so
        a re-run after a crash anywhere starts from the same state."""
        self.ledger.record(batch.files, batch.batch_id)
        failpoint("run.ledger_recorded")
        carried.advance(self.lake, batch.batch_id)
        failpoint("run.advanced")
        finish_batch(self.lake, batch.batch_id)
