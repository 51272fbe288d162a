"""What `stomp-lake maintain` does for a scheduler: check that capture files reached the lake,
keep the lake's files in shape (`pipeline.lake.maintenance`), close connections carried for too
long, and retire capture files the lake already holds.

Everything that changes the lake runs under its lock (`locked`), and only on a lake that
`pipeline.lake.integrity` finds intact, as `stomp-lake run` does.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

import schemas
from pipeline.errors import StompLakeError, UsageError
from pipeline.inputs import discover
from pipeline.lake import Lake, Ledger, lake_lock
from pipeline.lake.batches import batch_sequence
from pipeline.lake.commit import app_id_for, batch_committed, open_table
from pipeline.lake.integrity import ensure_intact
from pipeline.lake.layout import private_umask
from pipeline.lake.maintenance import SECONDS_PER_DAY, carried_connections, carried_state_age_days

RetentionAction = Literal["keep", "delete", "move"]


class CheckFailed(StompLakeError):
    """The lake is not as the scheduler expects it (files missing from the ledger, no tables,
    connections still carried after expiry)."""

    exit_code = 1


class NoLake(StompLakeError):
    """The lake root does not exist; maintenance never creates one."""

    exit_code = 1


def existing_lake(root: Path) -> Lake:
    lake = Lake(root)
    if not lake.root.is_dir():
        raise NoLake(f"no lake at {lake.root}")
    return lake


@contextmanager
def locked(lake: Lake, wait: float) -> Iterator[None]:
    """The lake's lock (LakeBusy after `wait` seconds), on an intact lake (DamagedLake, nothing
    changed, when it is not), with the lake's private file modes."""
    with lake_lock(lake, wait=wait), private_umask():
        ensure_intact(lake)
        yield


def commit_report(batches: Iterable[str], tables: Iterable[str], files: int) -> str:
    """One JSON line: the batches, the tables they committed to, the files checked (the last line
    of `check` and `expire-state`, which the DAGs read as `stomp_lake_dags.assets.CommitReport`)."""
    return json.dumps(
        {"batches": sorted(set(batches)), "tables": sorted(tables), "files": files},
        sort_keys=True,
    )


def committed_tables(lake: Lake, batches: Sequence[str]) -> list[str]:
    """The data tables that hold a commit of any of `batches`."""
    found = []
    for table in schemas.TABLES:
        delta = open_table(lake.table_path(table))
        if delta is None:
            continue
        app_id = app_id_for(table)
        if any(batch_committed(delta, app_id, batch_sequence(lake, b), b) for b in batches):
            found.append(table)
    return found


@dataclass(frozen=True, slots=True)
class IngestCheck:
    problems: list[str]  # none: every file is in the ledger and the lake has tables
    ingested: int
    duplicates: int  # files whose contents the ledger holds under another path
    batches: list[str]  # that committed the files (since the time asked)
    tables: list[str]  # that those batches committed to
    lake_tables: list[str]
    files: int


def check_ingested(
    lake: Lake, files: Sequence[str], committed_since: datetime | None
) -> IngestCheck:
    """Whether the ledger holds every file and the lake has tables; the batches that committed
    these files since `committed_since` (all of them when None) and their tables."""
    if committed_since is not None and committed_since.tzinfo is None:
        raise UsageError("--committed-since needs a time zone")
    # `stomp-lake run` records resolved paths; resolving here keeps symlinked folders matching.
    paths = [str(Path(f).resolve()) for f in files]
    ledger = Ledger(lake)
    scan = ledger.scan(paths)
    problems = [f"not ingested: {f.path}" for f in scan.new]
    problems += [f"changed since it was ingested (not taken): {f.path}" for f in scan.changed]
    problems += [f"unreadable or still changing: {p.path}: {p.detail}" for p in scan.problems]
    lake_tables = lake.table_names()
    if not lake_tables:
        problems.append(f"no tables in {lake.tables_dir}")
    batches: list[str] = []
    if not problems:
        held = set(scan.seen) | {d.ingested_path for d in scan.duplicates}
        batches = sorted(
            {
                entry["batch_id"]
                for entry in ledger.entries().to_pylist()
                if entry["path"] in held
                and (committed_since is None or entry["ingested_at"] >= committed_since)
            }
        )
    tables = committed_tables(lake, batches) if batches else []
    return IngestCheck(
        problems, len(scan.seen), len(scan.duplicates), batches, tables, lake_tables, len(paths)
    )


@dataclass(frozen=True, slots=True)
class Retention:
    old: int  # files older than the retention
    ingested: list[Path]  # of those, the ones the ledger holds
    done: list[tuple[Path, Path | None]]  # (file, where it moved; None: deleted)


def retain_captures(
    lake: Lake,
    capture_dir: Path,
    older_than_days: float,
    action: RetentionAction,
    archive: Path | None,
    now: float,
) -> Retention:
    """Delete or move capture files older than the retention, only once the ledger holds them
    (`keep`: only count them)."""
    if action == "move" and archive is None:
        raise UsageError("retain-captures: --action move needs --archive-dir")
    cutoff = now - older_than_days * SECONDS_PER_DAY
    old = [Path(p) for p in discover([capture_dir]) if _older_than(Path(p), cutoff)]
    scan = Ledger(lake).scan(old)
    ingested = [Path(p) for p in scan.seen] + [Path(d.file.path) for d in scan.duplicates]
    done: list[tuple[Path, Path | None]] = []
    for path in ingested if action != "keep" else []:
        if action == "delete" or archive is None:
            path.unlink(missing_ok=True)
            done.append((path, None))
        else:
            target = archive / path.resolve().relative_to(capture_dir.resolve())
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(path, target)
            done.append((path, target))
    return Retention(len(old), ingested, done)


def _older_than(path: Path, cutoff: float) -> bool:
    try:
        return path.stat().st_mtime < cutoff
    except OSError:  # gone since the listing
        return False


@dataclass(frozen=True, slots=True)
class CarriedAge:
    age_days: float | None  # since a batch last moved it; None: no connection is carried
    connections: int


def carried_age(lake: Lake) -> CarriedAge:
    return CarriedAge(carried_state_age_days(lake, time.time()), carried_connections(lake))


def close_carried(
    lake: Lake, batch_id: str, run: Callable[[Sequence[str]], int], run_options: Sequence[str]
) -> list[str]:
    """End the carried connections ('capture_end'); the tables batch `batch_id` committed to.

    `run` is the `stomp-lake run` command line (it takes the lake lock and checks the lake
    itself), here over no files; `run_options` are the ingestion's (body mode and login hashing
    must not differ). A run that fails ends with its own exit code (RunFailed).
    """
    with tempfile.TemporaryDirectory(prefix="stomp-lake-expire-") as empty:
        argv = ["run", "--input", empty, "--lake", str(lake.root), "--open-connections", "close"]
        code = run([*argv, "--batch-id", batch_id, *run_options])
    if code != 0:
        raise RunFailed(code)
    left = carried_connections(lake)
    if left:
        # e.g. the run resumed a batch an ingestion run left pending instead: try again later
        raise CheckFailed(f"expire-state: {left} connections still carried after the run")
    return committed_tables(lake, [batch_id])


class RunFailed(StompLakeError):
    """The `stomp-lake run` that closes carried connections failed (it said why)."""

    def __init__(self, exit_code: int) -> None:
        self.exit_code = exit_code
        super().__init__(f"expire-state: stomp-lake run exited {exit_code}")
