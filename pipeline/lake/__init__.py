"""The lake: Delta tables written by Spark + delta-rs, the ingestion ledger, locking, upkeep."""

from __future__ import annotations

from pipeline.lake.batches import (
    BatchPending,
    PendingBatch,
    batch_sequence,
    begin_batch,
    finish_batch,
    new_batch_id,
    pending_batch,
)
from pipeline.lake.engines import duckdb_connect
from pipeline.lake.fingerprint import FileFingerprint
from pipeline.lake.layout import LEDGER, Lake
from pipeline.lake.ledger import Ledger, LedgerScan
from pipeline.lake.lock import LakeBusy, lake_lock
from pipeline.lake.maintenance import compact, vacuum
from pipeline.lake.orphans import cleanup_lake, cleanup_orphans
from pipeline.lake.reader import TableInfo, TableNotFound, list_tables, read_table
from pipeline.lake.staging import StagedBatch, stage_batch
from pipeline.lake.table_schema import SchemaMismatch
from pipeline.lake.writer import WriteResult, commit_staged, delta_jars_available, write_table_batch

__all__ = [
    "LEDGER",
    "BatchPending",
    "FileFingerprint",
    "Lake",
    "LakeBusy",
    "Ledger",
    "LedgerScan",
    "PendingBatch",
    "SchemaMismatch",
    "StagedBatch",
    "TableInfo",
    "TableNotFound",
    "WriteResult",
    "batch_sequence",
    "begin_batch",
    "cleanup_lake",
    "cleanup_orphans",
    "commit_staged",
    "compact",
    "delta_jars_available",
    "duckdb_connect",
    "finish_batch",
    "lake_lock",
    "list_tables",
    "new_batch_id",
    "pending_batch",
    "read_table",
    "stage_batch",
    "vacuum",
    "write_table_batch",
]
