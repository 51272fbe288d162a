"""Commit Parquet files that are already in place as one Delta transaction (delta-rs), once per
batch.

Each commit carries the app transaction `stomp-lake:<table>` at the batch's sequence number and
the batch id in its commit info. A batch counts as committed when the table's transaction
version equals its number; when a later batch already moved the version past it, the commit
history decides.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake import Field as DeltaField
from deltalake import Schema as DeltaSchema
from deltalake.transaction import AddAction, RemoveAction, create_table_with_add_actions

from pipeline.lake.integrity import record_new_commits
from pipeline.lake.layout import private_umask
from pipeline.lake.table_schema import SchemaMismatch, added_fields

BATCH_ID_KEY = "stomp_lake_batch_id"
BATCH_SEQ_KEY = "stomp_lake_batch_seq"


@dataclass(frozen=True, slots=True)
class DataFile:
    """A Parquet file under the table root, ready to be added."""

    path: str  # relative to the table root, as on disk (delta-rs %-encodes it in the log)
    size: int
    partition_values: dict[str, str | None]
    modification_time_ms: int
    rows: int
    stats: dict[str, Any] = field(default_factory=dict)

    def add_action(self) -> AddAction:
        return AddAction(
            path=self.path,
            size=self.size,
            partition_values=self.partition_values,
            modification_time=self.modification_time_ms,
            data_change=True,
            stats=json.dumps(self.stats, allow_nan=False),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "size": self.size,
            "partition_values": self.partition_values,
            "modification_time_ms": self.modification_time_ms,
            "rows": self.rows,
            "stats": self.stats,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DataFile:
        return cls(
            path=str(data["path"]),
            size=int(data["size"]),
            partition_values=dict(data["partition_values"]),
            modification_time_ms=int(data["modification_time_ms"]),
            rows=int(data["rows"]),
            stats=dict(data["stats"]),
        )


def app_id_for(table: str) -> str:
    return f"stomp-lake:{table}"


def open_table(path: Path) -> DeltaTable | None:
    return DeltaTable(path) if DeltaTable.is_deltatable(str(path)) else None


def batch_committed(table: DeltaTable, app_id: str, seq: int, batch_id: str) -> bool:
    version = table.transaction_version(app_id)
    if version is None or version < seq:
        return False
    if version == seq:
        return True
    return any(commit_batch_id(commit) == batch_id for commit in table.history())


def commit_batch_id(commit: dict[str, Any]) -> str | None:
    """The batch id a commit carries: ours in commit info, or the Delta connector's userMetadata."""
    if BATCH_ID_KEY in commit:
        return str(commit[BATCH_ID_KEY])
    try:
        user = json.loads(commit.get("userMetadata") or "{}")
    except json.JSONDecodeError:
        return None
    return str(user[BATCH_ID_KEY]) if isinstance(user, dict) and BATCH_ID_KEY in user else None


def commit_properties(
    table: DeltaTable | None, app_id: str, seq: int, batch_id: str
) -> CommitProperties:
    current = table.transaction_version(app_id) if table is not None else None
    # Never lower the marker: a batch resumed after a later one keeps the later number.
    version = seq if current is None else max(current, seq)
    return CommitProperties(
        custom_metadata={BATCH_ID_KEY: batch_id, BATCH_SEQ_KEY: seq},
        app_transactions=[Transaction(app_id, version)],
    )


def check_fits(
    table: DeltaTable, schema: pa.Schema, partition_by: list[str], name: str
) -> list[DeltaField]:
    """Columns the batch adds to the table; SchemaMismatch when it cannot be appended."""
    existing_partitions = table.metadata().partition_columns
    if existing_partitions != partition_by:
        raise SchemaMismatch(
            f"table {name} is partitioned by {existing_partitions}, the batch by {partition_by}"
        )
    return added_fields(table.schema(), schema)


def commit_files(
    table_path: Path,
    files: list[DataFile],
    *,
    schema: pa.Schema,
    partition_by: list[str],
    app_id: str,
    batch_id: str,
    seq: int,
) -> int:
    """Add `files` to the table (creating it) in one transaction; returns the new version.

    A table that exists and gets no files is left as it is. Each new commit file is recorded
    in the lake's `_state` (`pipeline.lake.integrity`), so later damage to it is found.
    """
    table = open_table(table_path)
    actions = [f.add_action() for f in files]
    with private_umask():
        if table is None:
            create_table_with_add_actions(
                str(table_path),
                DeltaSchema.from_arrow(schema),
                actions,
                mode="error",
                partition_by=partition_by,
                name=table_path.name,
                commit_properties=commit_properties(None, app_id, seq, batch_id),
            )
            record_new_commits(table_path, -1)
            return 0
        new_columns = check_fits(table, schema, partition_by, table_path.name)
        if not actions:
            return table.version()
        before = table.version()
        if new_columns:
            table.alter.add_columns(new_columns)
            table.update_incremental()
        appended: list[AddAction | RemoveAction] = [*actions]  # the parameter's list type
        table.create_write_transaction(
            appended,
            "append",
            table.schema(),
            partition_by=partition_by,
            commit_properties=commit_properties(table, app_id, seq, batch_id),
        )
        table.update_incremental()
        record_new_commits(table_path, before)
        return table.version()
