"""The ingestion ledger: every capture file a committed batch covered, so each counts once.

A Delta table at <lake>/_ledger (path, size, mtime_ns, xxh3_128, batch_id, ingested_at): pyarrow
writes the file, delta-rs commits it, as for the data tables. The content hash's column is named
by its hash: a ledger made by a release that hashed with SHA-256 has `sha256` instead, and its
lake goes on hashing with SHA-256 (pipeline.lake.fingerprint), so that its files still match.

A file is already ingested when its path, size and mtime match a ledger row (no hashing), or
when its content hash does (the same capture renamed or copied: reported as a duplicate). A known
path whose size or mtime changed and whose content is new is reported as changed and not taken:
ingesting it again would count its old part twice.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.errors import StompLakeError
from pipeline.lake.batches import batch_sequence, validate_batch_id
from pipeline.lake.commit import DataFile, app_id_for, batch_committed, commit_files, open_table
from pipeline.lake.failpoints import failpoint
from pipeline.lake.fingerprint import (
    CONTENT_HASH,
    CONTENT_HASHES,
    FileChangedWhileReading,
    FileFingerprint,
    content_digest,
    fingerprint,
    stat_key,
)
from pipeline.lake.layout import LEDGER, Lake, make_private_dir, private_umask
from pipeline.lake.stats import file_stats


def ledger_schema(hash_name: str = CONTENT_HASH) -> pa.Schema:
    return pa.schema(
        [
            pa.field("path", pa.string(), nullable=False),
            pa.field("size", pa.int64(), nullable=False),
            pa.field("mtime_ns", pa.int64(), nullable=False),
            pa.field(hash_name, pa.string(), nullable=False),
            pa.field("batch_id", pa.string(), nullable=False),
            pa.field("ingested_at", pa.timestamp("us", tz="UTC"), nullable=False),
        ]
    )


class UnknownLedger(ValueError, StompLakeError):
    """A ledger whose columns name no content hash this release knows."""

    exit_code = 1


def hash_name_of(columns: Sequence[str]) -> str:
    """The content hash a ledger's rows hold: the one its columns name."""
    for name in CONTENT_HASHES:
        if name in columns:
            return name
    raise UnknownLedger(
        f"the ledger's columns {list(columns)} name no content hash of {list(CONTENT_HASHES)}"
    )


def _digest(found: FileFingerprint, hash_name: str) -> str:
    # A batch is hashed as its ledger hashes (Ledger.scan); a batch begun before its lake's
    # ledger was made is hashed again if it came by the other hash.
    if found.hash_name == hash_name:
        return found.digest
    return content_digest(found.path, hash_name)


@dataclass(frozen=True, slots=True)
class Duplicate:
    """Same content as a file already ingested (or earlier in the same scan)."""

    file: FileFingerprint
    ingested_path: str


@dataclass(frozen=True, slots=True)
class LedgerProblem:
    path: str
    kind: str  # "unreadable" | "changing"
    detail: str


@dataclass(slots=True)
class LedgerScan:
    new: list[FileFingerprint] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)
    duplicates: list[Duplicate] = field(default_factory=list)
    changed: list[FileFingerprint] = field(default_factory=list)
    problems: list[LedgerProblem] = field(default_factory=list)


class Ledger:
    def __init__(self, lake: Lake) -> None:
        self.lake = lake
        self.path = lake.ledger_path

    def entries(self) -> pa.Table:
        table = open_table(self.path)
        if table is None:
            return ledger_schema().empty_table()
        return table.to_pyarrow_table()

    def scan(
        self, paths: Iterable[str | Path], on_first_unseen: Callable[[], None] | None = None
    ) -> LedgerScan:
        """``on_first_unseen()`` is called once, before the first file the ledger does not know
        by path, size and mtime is hashed (the run starts Spark then, while the files hash)."""
        entries = self.entries()
        hash_name = hash_name_of(entries.schema.names)
        ingested_paths = entries.column("path").to_pylist()
        known_stats = set(
            zip(
                ingested_paths,
                entries.column("size").to_pylist(),
                entries.column("mtime_ns").to_pylist(),
                strict=True,
            )
        )
        path_of_hash = dict(zip(entries.column(hash_name).to_pylist(), ingested_paths, strict=True))
        known_paths = set(ingested_paths)
        scan = LedgerScan()
        scanned: set[str] = set()
        for candidate in paths:
            try:
                key = stat_key(candidate)
                if key[0] in scanned:
                    continue
                scanned.add(key[0])
                if key in known_stats:
                    scan.seen.append(key[0])
                    continue
                if on_first_unseen is not None:
                    on_first_unseen()
                    on_first_unseen = None
                found = fingerprint(candidate, hash_name)
            except FileChangedWhileReading as error:
                scan.problems.append(LedgerProblem(str(candidate), "changing", str(error)))
                continue
            except OSError as error:
                scan.problems.append(LedgerProblem(str(candidate), "unreadable", str(error)))
                continue
            if found.digest in path_of_hash:
                scan.duplicates.append(Duplicate(found, path_of_hash[found.digest]))
            elif found.path in known_paths:
                scan.changed.append(found)
            else:
                scan.new.append(found)
                path_of_hash[found.digest] = found.path
        return scan

    def new_files(self, paths: Iterable[str | Path]) -> list[FileFingerprint]:
        return self.scan(paths).new

    def is_recorded(self, batch_id: str) -> bool:
        table = open_table(self.path)
        seq = batch_sequence(self.lake, validate_batch_id(batch_id))
        return table is not None and batch_committed(table, app_id_for(LEDGER), seq, batch_id)

    def record(self, files: Sequence[FileFingerprint], batch_id: str) -> int | None:
        """Add the batch's files (one commit, once per batch id); the ledger version after, or
        None when there was nothing to record and no ledger yet."""
        seq = batch_sequence(self.lake, validate_batch_id(batch_id))
        app_id = app_id_for(LEDGER)
        table = open_table(self.path)
        if table is not None and batch_committed(table, app_id, seq, batch_id):
            return table.version()
        if not files:
            return table.version() if table is not None else None
        if table is None:
            hash_name = files[0].hash_name
        else:
            hash_name = hash_name_of([f.name for f in table.schema().fields])
        schema = ledger_schema(hash_name)
        rows = pa.table(
            {
                "path": [f.path for f in files],
                "size": [f.size for f in files],
                "mtime_ns": [f.mtime_ns for f in files],
                hash_name: [_digest(f, hash_name) for f in files],
                "batch_id": [batch_id] * len(files),
                "ingested_at": [datetime.now(UTC)] * len(files),
            },
            schema=schema,
        )
        placed = self._write_file(rows, seq)
        failpoint("ledger.placed")
        return commit_files(
            self.path,
            [placed],
            schema=schema,
            partition_by=[],
            app_id=app_id,
            batch_id=batch_id,
            seq=seq,
        )

    def _write_file(self, rows: pa.Table, seq: int) -> DataFile:
        """One Parquet file in the ledger folder, not yet committed (like a table write)."""
        make_private_dir(self.path)
        name = f"part-{seq:08d}-{uuid.uuid4().hex}.zstd.parquet"
        with private_umask():
            pq.write_table(rows, self.path / name, compression="zstd")
        metadata = pq.read_metadata(self.path / name)
        info = (self.path / name).stat()
        return DataFile(
            path=name,
            size=info.st_size,
            partition_values={},
            modification_time_ms=info.st_mtime_ns // 1_000_000,
            rows=rows.num_rows,
            stats=file_stats(metadata),
        )
