"""Remove what killed runs left in a table folder: staging folders, Parquet files no log version
references, and delta-rs' temporary commit files.

A file counts as referenced when any commit still in the log or any checkpoint adds or removes
it, so files that older versions within retention still read are kept (vacuum's job). Only
entries older than a safety age go, unless this process holds the lake lock: then no other run
can be writing and everything unreferenced goes at once.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import time
from pathlib import Path
from urllib.parse import unquote

import pyarrow.parquet as pq

from pipeline.lake.commit import open_table
from pipeline.lake.layout import DELTA_LOG, LEDGER, STAGING, Lake, validate_table_name
from pipeline.lake.lock import holds_lake_lock
from pipeline.lake.staging import active_staging

DEFAULT_SAFETY_AGE_SECONDS = 3600.0

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
    active_dirs, active_files = active_staging(path)
    removed = _remove_staging(path / STAGING, cutoff, active_dirs)
    try:
        referenced = referenced_paths(path) | active_files
    except UnreadableLog as error:
        log.warning("left data files of %s alone: %s", path, error)
        return removed
    emptied: set[Path] = set()
    for data_file in data_files(path):
        relative = data_file.relative_to(path).as_posix()
        if relative not in referenced and _mtime(data_file) <= cutoff:
            data_file.unlink(missing_ok=True)
            emptied.add(data_file.parent)
            removed += 1
    for temp in (path / DELTA_LOG).glob("_commit_*.json.tmp"):
        if _mtime(temp) <= cutoff:
            temp.unlink(missing_ok=True)
            removed += 1
    _remove_empty_folders(path, cutoff, emptied)
    return removed


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


def _remove_staging(staging_root: Path, cutoff: float, active: set[Path]) -> int:
    if not staging_root.is_dir():
        return 0
    removed = 0
    for folder in staging_root.iterdir():
        if folder in active or _newest_mtime(folder) > cutoff:
            continue
        if folder.is_dir():
            shutil.rmtree(folder, ignore_errors=True)
        else:
            folder.unlink(missing_ok=True)
        removed += 1
    return removed


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
