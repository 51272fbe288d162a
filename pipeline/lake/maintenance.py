"""Table upkeep for the scheduler: compact small files, vacuum files past retention.

Both commit through delta-rs and should run under `lake_lock`. Compaction leaves the replaced
files in place (older versions still read them) until a vacuum past the retention removes them.
"""

from __future__ import annotations

from typing import Any

from deltalake import ColumnProperties, DeltaTable, WriterProperties

from pipeline.lake.commit import open_table
from pipeline.lake.layout import Lake, private_umask
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


def _open(lake: Lake, table: str) -> DeltaTable:
    delta = open_table(lake.delta_path(table))
    if delta is None:
        raise TableNotFound(f"no Delta table {table!r} in {lake.root}")
    return delta
