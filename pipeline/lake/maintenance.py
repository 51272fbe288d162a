"""Upkeep of the lake's own files: compact small files, vacuum files past retention, prune the
carried connection state no batch will read again.

All of it changes the lake and runs under `lake_lock`. Compaction leaves the replaced files in
place (older versions still read them) until a vacuum past the retention removes them.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from typing import Any

import pyarrow.parquet as pq
from deltalake import ColumnProperties, DeltaTable, WriterProperties

from pipeline.lake import carried
from pipeline.lake.batches import pending_batch
from pipeline.lake.commit import open_table
from pipeline.lake.layout import DELTA_LOG, LEDGER, Lake, private_umask
from pipeline.lake.reader import TableNotFound
from pipeline.lake.stats import FREE_TEXT_COLUMNS


def compact(lake: Lake, table: str, *, target_file_mb: int = 128) -> dict[str, Any]:
    """Merge small files within each partition; delta-rs' metrics (numFilesAdded, ...)."""
    delta = _open(lake, table)
    no_bounds = ColumnProperties(statistics_enabled="NONE")
    columns = [field.name for field in delta.schema().fields]
    properties = WriterProperties(
        compression="ZSTD",  # free text keeps no bounds, as the run writes it (`lake.stats`)
        column_properties={name: no_bounds for name in columns if name in FREE_TEXT_COLUMNS},
    )
    with private_umask():
        return delta.optimize.compact(
            target_size=target_file_mb * 1024 * 1024, writer_properties=properties
        )


def vacuum(lake: Lake, table: str, *, retention_hours: int) -> list[str]:
    """Delete files that the table stopped using more than `retention_hours` ago; their paths.

    Time travel to versions older than the retention stops working. Files no commit ever
    referenced are `cleanup_orphans`' job.
    """
    if retention_hours < 0:
        raise ValueError("retention_hours must be >= 0")
    delta = _open(lake, table)
    with private_umask():  # vacuum commits too
        return delta.vacuum(
            retention_hours=retention_hours,
            dry_run=False,
            enforce_retention_duration=False,
            full=False,
        )


SECONDS_PER_HOUR = 3_600
SECONDS_PER_DAY = 86_400


@dataclass(frozen=True, slots=True)
class Compacted:
    table: str
    files_removed: int
    files_added: int


@dataclass(frozen=True, slots=True)
class Vacuumed:
    files_removed: dict[str, int]  # by table (and the ledger)
    state_folders_removed: list[str]  # superseded batches' carried state


def delta_tables(lake: Lake) -> list[str]:
    """The lake's Delta tables and its ledger, where they exist."""
    names = [*lake.table_names(), LEDGER]
    return [name for name in names if (lake.delta_path(name) / DELTA_LOG).is_dir()]


def compact_lake(lake: Lake, target_file_mb: int) -> list[Compacted]:
    """`compact` on every table and the ledger."""
    done = []
    for table in delta_tables(lake):
        metrics = compact(lake, table, target_file_mb=target_file_mb)
        removed, added = metrics.get("numFilesRemoved", 0), metrics.get("numFilesAdded", 0)
        done.append(Compacted(table, int(removed), int(added)))
    return done


def vacuum_lake(lake: Lake, retention_hours: int, now: float) -> Vacuumed:
    """`vacuum` on every table and the ledger, then `prune_carried_state` past the same
    retention."""
    removed = {
        table: len(vacuum(lake, table, retention_hours=retention_hours))
        for table in delta_tables(lake)
    }
    return Vacuumed(removed, prune_carried_state(lake, retention_hours, now))


def prune_carried_state(lake: Lake, retention_hours: float, now: float) -> list[str]:
    """Remove the carried-state folders of batches the state pointer has moved past, older than
    the retention; their batch ids.

    Every batch writes `_state/connections/<batch>/` and the next batch starts from the one the
    pointer names, so older folders are never read again; the pending batch's own folder is kept
    too. Runs under the lake lock, so no batch is writing one.
    """
    root = carried.connections_dir(lake)
    if not root.is_dir():
        return []
    pending = pending_batch(lake)
    keep = {carried.current_state_batch(lake), pending.batch_id if pending is not None else None}
    cutoff = now - retention_hours * SECONDS_PER_HOUR
    removed = []
    for folder in sorted(root.iterdir()):
        if folder.is_dir() and folder.name not in keep and folder.stat().st_mtime <= cutoff:
            shutil.rmtree(folder)
            removed.append(folder.name)
    return removed


def carried_connections(lake: Lake) -> int:
    """Connections whose state the pointer carries to the next batch."""
    state = carried.current_state(lake)
    if state is None:
        return 0
    return sum(pq.read_metadata(part).num_rows for part in state.parts)


def carried_state_age_days(lake: Lake, now: float) -> float | None:
    """Days since the carried connection state last moved, or None when nothing is carried."""
    if carried_connections(lake) == 0:
        return None
    return (now - carried.pointer_path(lake).stat().st_mtime) / SECONDS_PER_DAY


def _open(lake: Lake, table: str) -> DeltaTable:
    delta = open_table(lake.delta_path(table))
    if delta is None:
        raise TableNotFound(f"no Delta table {table!r} in {lake.root}")
    return delta
