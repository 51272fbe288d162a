"""Batch ids, their sequence numbers, and the one batch a run has under way.

A batch id is a readable string (`20261122T101500Z-ab12cd`); Delta app transactions need a
number that grows. The registry in <lake>/_state/batches/ gives each batch id the next number
the first time it is seen and the same number ever after. Numbers only grow, gaps are harmless.

The pending batch (<lake>/_state/pending-batch.json) names the batch a run started and the input
files it covers. A run killed half way leaves it behind; the next run resumes that batch with
the same id and files, so tables it already committed skip it and the rest catch up.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import secrets
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline.lake.fingerprint import FileFingerprint
from pipeline.lake.layout import SECRET_DIR_MODE, SECRET_FILE_MODE, Lake, make_private_dir
from pipeline.lake.statefile import read_json, write_json_atomic

_BATCH_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class BatchPending(RuntimeError):
    def __init__(self, pending: PendingBatch) -> None:
        self.pending = pending
        super().__init__(
            f"batch {pending.batch_id} (started {pending.started_at}, {len(pending.files)} files)"
            " is still pending: resume or finish it before starting another"
        )


@dataclass(frozen=True, slots=True)
class PendingBatch:
    batch_id: str
    seq: int
    files: tuple[FileFingerprint, ...]
    started_at: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "seq": self.seq,
            "files": [f.to_dict() for f in self.files],
            "started_at": self.started_at,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PendingBatch:
        return cls(
            batch_id=str(data["batch_id"]),
            seq=int(data["seq"]),
            files=tuple(FileFingerprint.from_dict(f) for f in data["files"]),
            started_at=str(data["started_at"]),
        )


def validate_batch_id(batch_id: str) -> str:
    if not _BATCH_ID.fullmatch(batch_id):
        raise ValueError(
            f"bad batch id {batch_id!r}: letters, digits, '.', '_' or '-' (at most 128)"
        )
    return batch_id


def new_batch_id(now: datetime | None = None, files: Sequence[FileFingerprint] = ()) -> str:
    """`<UTC time>-<6 hex>`: the hex derives from the files' content when given, else random."""
    stamp = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    if files:
        joined = "\n".join(sorted(f.digest for f in files)).encode()
        suffix = hashlib.sha256(joined).hexdigest()[:6]
    else:
        suffix = secrets.token_hex(3)
    return f"{stamp}-{suffix}"


def batch_sequence(lake: Lake, batch_id: str) -> int:
    """The batch's number in this lake: allocated on first sight, stable afterwards."""
    entry = _registry_dir(lake) / f"{validate_batch_id(batch_id)}.json"
    known = read_json(entry)
    if known is not None:
        return int(known["seq"])
    with _registry_lock(lake):
        known = read_json(entry)
        if known is not None:
            return int(known["seq"])
        seq = _last_sequence(lake) + 1
        write_json_atomic(counter_path(lake), {"last": seq})
        registered_at = datetime.now(UTC).isoformat(timespec="seconds")
        write_json_atomic(entry, {"batch_id": batch_id, "seq": seq, "registered_at": registered_at})
        return seq


def begin_batch(
    lake: Lake, files: Sequence[FileFingerprint], *, batch_id: str | None = None
) -> PendingBatch:
    """Register a new batch over `files` and mark it pending; BatchPending if one already is."""
    existing = pending_batch(lake)
    if existing is not None:
        raise BatchPending(existing)
    batch_id = validate_batch_id(batch_id or new_batch_id(files=files))
    pending = PendingBatch(
        batch_id=batch_id,
        seq=batch_sequence(lake, batch_id),
        files=tuple(files),
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    write_json_atomic(pending_path(lake), pending.to_dict())
    return pending


def pending_batch(lake: Lake) -> PendingBatch | None:
    data = read_json(pending_path(lake))
    return None if data is None else PendingBatch.from_dict(data)


def read_pending(lake: Lake) -> PendingBatch | None:
    """`pending_batch`, with ValueError saying what is wrong when the file is damaged."""
    try:
        return pending_batch(lake)
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"not a pending batch (cut or garbled): {error!r}") from error


def read_counter(lake: Lake) -> int | None:
    """The last sequence number handed out, None when there is no counter; ValueError saying
    what is wrong when the file is damaged."""
    try:
        counter = read_json(counter_path(lake))
        return None if counter is None else int(counter["last"])
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"not a batch counter (cut or garbled): {error!r}") from error


def registered_sequence(lake: Lake, batch_id: str) -> int | None:
    """The batch's number when it has one (never allocates one); None otherwise or when its
    registry entry cannot be read."""
    try:
        known = read_json(lake.state_dir / "batches" / f"{validate_batch_id(batch_id)}.json")
        return None if known is None else int(known["seq"])
    except (ValueError, KeyError, TypeError):
        return None


def registered_batch(lake: Lake, seq: int) -> str | None:
    """The batch id registered with number `seq`, if any."""
    registry = lake.state_dir / "batches"
    if not registry.is_dir():
        return None
    for entry in registry.glob("*.json"):
        if registered_sequence(lake, entry.stem) == seq:
            return entry.stem
    return None


def finish_batch(lake: Lake, batch_id: str) -> None:
    """Clear the pending mark once the ledger has recorded the batch."""
    pending = pending_batch(lake)
    if pending is not None and pending.batch_id == batch_id:
        pending_path(lake).unlink()


def _registry_dir(lake: Lake) -> Path:
    lake.ensure()
    return make_private_dir(lake.state_dir / "batches", SECRET_DIR_MODE)


def counter_path(lake: Lake) -> Path:
    return lake.state_dir / "batch-counter.json"


def pending_path(lake: Lake) -> Path:
    return lake.state_dir / "pending-batch.json"


def _last_sequence(lake: Lake) -> int:
    last = read_counter(lake)
    if last is not None:
        return last
    # Counter lost: never hand out a number already given.
    registered = (read_json(p) for p in _registry_dir(lake).glob("*.json"))
    return max((int(r["seq"]) for r in registered if r is not None), default=0)


@contextmanager
def _registry_lock(lake: Lake) -> Iterator[None]:
    fd = os.open(lake.state_dir / "batches.lock", os.O_RDWR | os.O_CREAT, SECRET_FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
