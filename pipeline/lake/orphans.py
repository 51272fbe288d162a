"""Remove what killed runs left in a table folder, and only what can be proven never committed.

A file goes only when this lake's own records prove no commit ever added it:
- a staging folder (`_staging/<batch id>.<suffix>/`) holds Parquet not placed yet; once the batch
  placed its files, the folder's manifest lists them, and they go when the table's log, checked
  intact first (`pipeline.lake.integrity`), shows that batch never committed;
- a ledger file `part-<batch number>-<uuid>.zstd.parquet` goes when its batch's ledger commit
  added another file, or when its batch is still pending and has no ledger commit;
- delta-rs' temporary commit files (`_delta_log/_commit_*.json.tmp`) were never renamed into a
  version.
Anything else the log does not reference (a file of no known batch, a table whose log is
damaged) is left where it is, with a warning. Only entries older than a safety age go, unless
this process holds the lake lock: then no other run can be writing and all of them go at once.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import shutil
import time
from pathlib import Path
from urllib.parse import unquote

import pyarrow.parquet as pq

from pipeline.lake.batches import pending_batch, registered_batch, registered_sequence
from pipeline.lake.commit import app_id_for, batch_committed, open_table
from pipeline.lake.integrity import check_delta
from pipeline.lake.layout import DELTA_LOG, LEDGER, STAGING, Lake, validate_table_name
from pipeline.lake.lock import holds_lake_lock
from pipeline.lake.staging import MANIFEST, active_staging
from pipeline.lake.statefile import read_json

DEFAULT_SAFETY_AGE_SECONDS = 3600.0
LEDGER_FILE = re.compile(r"part-(\d{8,})-[0-9a-f]{32}\.zstd\.parquet")

log = logging.getLogger(__name__)


class UnreadableLog(RuntimeError):
    pass


def cleanup_orphans(lake: Lake, table: str, *, min_age_seconds: float | None = None) -> int:
    """Number of staging folders and files removed from the table `table` (or `_ledger`)."""
    path = lake.delta_path(table)
    if not path.is_dir():
        return 0
    if min_age_seconds is None:
        min_age_seconds = 0.0 if holds_lake_lock(lake) else DEFAULT_SAFETY_AGE_SECONDS
    cutoff = time.time() - min_age_seconds
    damage = check_delta(lake, table)
    if damage:
        log.warning("left %s alone: its log is damaged: %s", path, damage[0].line())
        return 0
    try:
        referenced = referenced_paths(path)
    except UnreadableLog as error:
        log.warning("left %s alone: %s", path, error)
        return 0
    cleanup = _Cleanup(lake, table, path, cutoff, referenced)
    cleanup.staging()
    if table == LEDGER:
        cleanup.ledger_files()
    for temp in (path / DELTA_LOG).glob("_commit_*.json.tmp"):
        if _mtime(temp) <= cutoff:
            temp.unlink(missing_ok=True)
            cleanup.removed += 1
    cleanup.warn_unclaimed()
    _remove_empty_folders(path, cutoff, cleanup.emptied)
    return cleanup.removed


class _Cleanup:
    """One table's clean-up: what it removed, and the folders it emptied."""

    def __init__(
        self, lake: Lake, table: str, path: Path, cutoff: float, referenced: set[str]
    ) -> None:
        self.lake = lake
        self.table = table
        self.path = path
        self.cutoff = cutoff
        self.referenced = referenced
        self.active_dirs, self.active_files = active_staging(path)
        self.removed = 0
        self.emptied: set[Path] = set()

    def staging(self) -> None:
        root = self.path / STAGING
        if not root.is_dir():
            return
        for folder in sorted(root.iterdir()):
            if folder in self.active_dirs or _newest_mtime(folder) > self.cutoff:
                continue  # this process's batch in flight, or another run's
            if not folder.is_dir():
                folder.unlink(missing_ok=True)
                self.removed += 1
                continue
            if self._staged_batch(folder):
                shutil.rmtree(folder, ignore_errors=True)
                self.removed += 1

    def _staged_batch(self, folder: Path) -> bool:
        """Remove the placed files of the batch staged in ``folder`` when its commit provably
        never happened; whether the folder itself may go."""
        try:
            manifest = read_json(folder / MANIFEST)
            placed = [str(f["path"]) for f in manifest["files"]] if manifest is not None else []
        except (ValueError, KeyError, TypeError) as error:
            log.warning("left %s alone: its manifest cannot be read: %r", folder, error)
            return False
        if not placed:
            return True  # nothing placed: the folder holds all the batch left
        batch_id = folder.name.rpartition(".")[0]
        committed = self._committed(batch_id)
        if committed is None:
            log.warning(
                "left %s and its placed files alone: cannot tell whether batch %s committed",
                folder,
                batch_id,
            )
            return False
        if committed:
            return True  # its files are the table's now
        for relative in placed:
            if relative in self.referenced or relative in self.active_files:
                continue
            data_file = self.path / relative
            if data_file.exists():
                data_file.unlink()
                self.emptied.add(data_file.parent)
                self.removed += 1
        return True

    def _committed(self, batch_id: str) -> bool | None:
        """Whether the batch committed to this table; None when that cannot be told."""
        if not (self.path / DELTA_LOG).is_dir():
            return False  # the log was checked: a table with no commit at all
        seq = registered_sequence(self.lake, batch_id)
        if seq is None:
            return None
        try:
            table = open_table(self.path)
            return table is not None and batch_committed(
                table, app_id_for(self.table), seq, batch_id
            )
        except Exception:  # noqa: BLE001 - delta-rs cannot read it: prove nothing
            return None

    def ledger_files(self) -> None:
        pending = pending_batch(self.lake)
        for data_file in sorted(self.path.glob("part-*.parquet")):
            match = LEDGER_FILE.fullmatch(data_file.name)
            if match is None or data_file.name in self.referenced:
                continue
            if _mtime(data_file) > self.cutoff:
                continue
            batch_id = registered_batch(self.lake, int(match.group(1)))
            if batch_id is None:
                continue
            committed = self._committed(batch_id)
            # Committed: its commit (intact, checked) added another file. Not committed: only
            # the batch under way writes ledger files.
            if committed or (
                committed is False and pending is not None and pending.batch_id == batch_id
            ):
                data_file.unlink()
                self.removed += 1

    def warn_unclaimed(self) -> None:
        unclaimed = [
            data_file
            for data_file in data_files(self.path)
            if data_file.relative_to(self.path).as_posix() not in self.referenced
            and data_file.relative_to(self.path).as_posix() not in self.active_files
            and _mtime(data_file) <= self.cutoff
        ]
        if unclaimed:
            log.warning(
                "left %d files in %s that no commit references and no batch of this lake "
                "claims (e.g. %s): remove them by hand if no backup or other tool needs them",
                len(unclaimed),
                self.path,
                unclaimed[0],
            )


def cleanup_lake(lake: Lake, *, min_age_seconds: float | None = None) -> dict[str, int]:
    """`cleanup_orphans` over every table and the ledger: what a run does first, under the lock."""
    names = [*table_folders(lake), LEDGER]
    return {name: cleanup_orphans(lake, name, min_age_seconds=min_age_seconds) for name in names}


def table_folders(lake: Lake) -> list[str]:
    """Every table folder, with or without a Delta log: a run killed before a table's first
    commit leaves staged and placed files in a folder that has no log yet."""
    if not lake.tables_dir.is_dir():
        return []
    names = []
    for entry in sorted(lake.tables_dir.iterdir()):
        if entry.is_dir():
            with contextlib.suppress(ValueError):
                names.append(validate_table_name(entry.name))
    return names


def referenced_paths(table_path: Path) -> set[str]:
    """On-disk relative paths that the log (commits and checkpoints) adds or removes."""
    log_dir = table_path / DELTA_LOG
    if not log_dir.is_dir():
        return set()
    paths: set[str] = set()
    for commit in log_dir.glob("[0-9]*.json"):
        paths.update(_commit_paths(commit))
    for checkpoint in log_dir.glob("[0-9]*.checkpoint*.parquet"):
        paths.update(_checkpoint_paths(checkpoint))
    table = open_table(table_path)
    if table is not None:
        paths.update(unquote(p) for p in table.get_add_actions().column("path").to_pylist())
    return paths


def data_files(table_path: Path) -> list[Path]:
    """Parquet files of the table, outside `_`/`.` folders (log, staging)."""
    return [
        candidate
        for candidate in table_path.rglob("*.parquet")
        if not any(part[0] in "_." for part in candidate.relative_to(table_path).parts[:-1])
    ]


def _commit_paths(commit: Path) -> set[str]:
    paths: set[str] = set()
    for number, line in enumerate(commit.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            action = json.loads(line)
        except json.JSONDecodeError as error:
            raise UnreadableLog(f"{commit} line {number}: {error}") from error
        for kind in ("add", "remove"):
            if kind in action:
                paths.add(unquote(action[kind]["path"]))
    return paths


def _checkpoint_paths(checkpoint: Path) -> set[str]:
    try:
        frame = pq.read_table(checkpoint, columns=["add", "remove"])
    except Exception as error:  # corrupt or partial checkpoint: be conservative
        raise UnreadableLog(f"{checkpoint}: {error}") from error
    paths: set[str] = set()
    for kind in ("add", "remove"):
        for entry in frame.column(kind).to_pylist():
            if entry and entry.get("path"):
                paths.add(unquote(entry["path"]))
    return paths


def _remove_empty_folders(table_path: Path, cutoff: float, emptied: set[Path]) -> None:
    """Partition folders left empty: those this cleanup emptied, or old enough that no run
    is about to fill them."""
    folders = [p for p in table_path.rglob("*") if p.is_dir()]
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        relative = folder.relative_to(table_path).parts
        if relative[0].startswith(("_", ".")):
            continue
        if folder not in emptied and _mtime(folder) > cutoff:
            continue
        try:
            folder.rmdir()
            emptied.add(folder.parent)
        except OSError:
            continue  # not empty


def _newest_mtime(entry: Path) -> float:
    newest = _mtime(entry)
    if entry.is_dir():
        for child in entry.rglob("*"):
            newest = max(newest, _mtime(child))
    return newest


def _mtime(entry: Path) -> float:
    try:
        return entry.lstat().st_mtime
    except FileNotFoundError:
        return 0.0
