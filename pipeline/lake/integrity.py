"""Is the lake's state what this lake wrote? Checked by every run before it reads or writes
anything, and by `stomp-lake doctor`; no Spark, no delta-rs: file names, JSON lines and stats.

For each Delta table and the ledger: commit versions contiguous from 0 (or from the checkpoint
`_last_checkpoint` names), every line of every commit after it parses, the checkpoint readable
(and, the first time it is seen, agreeing with the commits it replaces), every data file of the
current snapshot there with the size the log gives. The commit files this lake wrote are
recorded in `_state/commits/<table>.jsonl` (file name, size, sha256), so a commit deleted or
edited afterwards, even into other valid JSON, is found. Commits and checkpoints nobody recorded
(a kill between commit and record, lakes of earlier releases, delta-rs maintenance and its
checkpoints) are recorded by the next run that finds the lake intact.

Also the batch counter, the pending batch and its registry entry (`_state`), and carried
connection state (`pipeline.lake.carried.check_carried`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow.parquet as pq

from pipeline.lake import carried
from pipeline.lake.damage import Damage, DamagedLake
from pipeline.lake.layout import (
    DELTA_LOG,
    LEDGER,
    SECRET_DIR_MODE,
    SECRET_FILE_MODE,
    Lake,
    make_private_dir,
    validate_table_name,
)

COMMITS_DIR = "commits"
LAST_CHECKPOINT = "_last_checkpoint"
_COMMIT_FILE = re.compile(r"(\d{20})\.json")
_CHECKPOINT_FILE = re.compile(r"(\d{20})\.checkpoint(?:\.\d+\.\d+)?\.parquet")

logger = logging.getLogger(__name__)

RESTORE_TABLE = "restore {folder} together with _state/ from one backup of the lake"
RESTORE_FILE = "restore the file from a backup of the lake"
REBUILD_COUNTER = "delete it: the next run rebuilds it from _state/batches/"
RESTORE_PENDING = "restore it from a backup of the lake (doctor lists what else is damaged)"


def check_lake(lake: Lake) -> list[Damage]:
    """Everything found wrong with the lake's state; an empty list when it can be trusted."""
    if not lake.root.is_dir():
        return []
    findings: list[Damage] = []
    for name in delta_names(lake):
        findings += check_delta(lake, name)
    findings += check_batch_state(lake)
    findings += carried.check_carried(lake)
    return findings


def ensure_intact(lake: Lake) -> None:
    """DamagedLake (nothing changed) when `check_lake` finds anything; otherwise records the
    commits no run recorded yet, so that later changes to them are found."""
    findings = check_lake(lake)
    if findings:
        raise DamagedLake(findings)
    for name in delta_names(lake):
        try:
            record_commits(lake, name)
        except OSError as error:  # a full disk: the records can wait for the next run
            logger.warning("commits of %s not recorded yet: %s", name, error)


def delta_names(lake: Lake) -> list[str]:
    """Tables with a folder or a commit record, and the ledger when it has either."""
    names: set[str] = set()
    if lake.tables_dir.is_dir():
        for entry in lake.tables_dir.iterdir():
            if entry.is_dir():
                with contextlib.suppress(ValueError):
                    names.add(validate_table_name(entry.name))
    records = lake.state_dir / COMMITS_DIR
    if records.is_dir():
        names.update(entry.stem for entry in records.glob("*.jsonl"))
    if lake.ledger_path.is_dir():
        names.add(LEDGER)
    return sorted(names)


# --- what this lake committed ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CommitRecord:
    size: int
    sha256: str


def record_path(lake: Lake, name: str) -> Path:
    return lake.state_dir / COMMITS_DIR / f"{name}.jsonl"


def read_records(lake: Lake, name: str) -> dict[str, CommitRecord]:
    """Log file name (commit or checkpoint) -> what was written. A line a kill cut short is
    skipped (that file then goes unchecked, as one never recorded)."""
    try:
        text = record_path(lake, name).read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    records: dict[str, CommitRecord] = {}
    for line in text.splitlines():
        try:
            entry = json.loads(line)
            records[str(entry["file"])] = CommitRecord(int(entry["size"]), str(entry["sha256"]))
        except (ValueError, KeyError, TypeError):
            continue
    return records


def record_commits(lake: Lake, name: str) -> None:
    """Append the size and sha256 of every commit and checkpoint file of the table not recorded
    yet (the caller found the log intact)."""
    log_dir = lake.delta_path(name) / DELTA_LOG
    if not log_dir.is_dir():
        return
    known = read_records(lake, name)
    found = [*commit_files(log_dir).values(), *checkpoint_files(log_dir)]
    new = [{"file": f.name, **_digest(f)} for f in sorted(found) if f.name not in known]
    if new:
        _append_records(lake, name, new)


def record_new_commits(delta_path: Path, since: int) -> None:
    """After a commit: record the table's commit files above version `since` (-1: a new table),
    when the table is one of a lake's. The commit stands whatever happens here: a record that
    cannot be written (a full disk) is written by the next run that finds the lake intact."""
    found = lake_of(delta_path)
    if found is None:
        return
    lake, name = found
    log_dir = delta_path / DELTA_LOG
    try:
        new = [
            {"file": commit.name, **_digest(commit)}
            for version, commit in sorted(commit_files(log_dir).items())
            if version > since
        ]
        if new:
            _append_records(lake, name, new)
    except OSError as error:
        logger.warning("commits of %s not recorded yet: %s", delta_path, error)


def lake_of(delta_path: Path) -> tuple[Lake, str] | None:
    """The lake and table name of a table or ledger folder, or None when it is in no lake."""
    if delta_path.name == LEDGER:
        root, name = delta_path.parent, LEDGER
    elif delta_path.parent.name == "tables":
        root, name = delta_path.parent.parent, delta_path.name
    else:
        return None
    lake = Lake(root)
    return (lake, name) if lake.state_dir.is_dir() else None


def _digest(commit: Path) -> dict[str, Any]:
    data = commit.read_bytes()
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _append_records(lake: Lake, name: str, entries: list[dict[str, Any]]) -> None:
    path = record_path(lake, name)
    make_private_dir(path.parent, SECRET_DIR_MODE)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, SECRET_FILE_MODE)
    try:
        size = os.fstat(fd).st_size
        # a kill may have cut the last line: start on a line of our own
        starts_clean = size == 0 or os.pread(fd, 1, size - 1) == b"\n"
        text = "" if starts_clean else "\n"
        text += "".join(json.dumps(entry, sort_keys=True) + "\n" for entry in entries)
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


# --- one Delta table ---------------------------------------------------------------------------


def checkpoint_files(log_dir: Path) -> list[Path]:
    with contextlib.suppress(FileNotFoundError):
        return [
            Path(entry.path)
            for entry in os.scandir(log_dir)
            if _CHECKPOINT_FILE.fullmatch(entry.name)
        ]
    return []


def commit_files(log_dir: Path) -> dict[int, Path]:
    found: dict[int, Path] = {}
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(log_dir):
            match = _COMMIT_FILE.fullmatch(entry.name)
            if match:
                found[int(match.group(1))] = Path(entry.path)
    return found


@dataclass(slots=True)
class _Log:
    """What one table's log says, and what is wrong with it."""

    path: Path
    folder: str  # as the operator knows it: tables/<name> or _ledger
    findings: list[Damage] = field(default_factory=list)

    def damage(self, path: Path, problem: str, repair: str | None = None) -> None:
        self.findings.append(
            Damage(path, problem, repair or RESTORE_TABLE.format(folder=self.folder))
        )


def check_delta(lake: Lake, name: str) -> list[Damage]:
    """What is wrong with the Delta log and current files of one table (or `_ledger`)."""
    path = lake.delta_path(name)
    log = _Log(path, LEDGER if name == LEDGER else f"tables/{name}")
    log_dir = path / DELTA_LOG
    records = read_records(lake, name)
    commits = commit_files(log_dir)
    checkpoint = _checkpoint(log, log_dir)
    recorded_commits = {
        int(match.group(1)): record
        for file, record in records.items()
        if (match := _COMMIT_FILE.fullmatch(file))
    }
    if not commits and checkpoint is None:
        if recorded_commits:
            first_recorded, last = min(recorded_commits), max(recorded_commits)
            if log_dir.is_dir():
                log.damage(
                    log_dir / f"{first_recorded:020d}.json",
                    "the log is empty, though this lake committed "
                    + _versions(first_recorded, last),
                )
            else:
                log.damage(
                    log_dir if path.is_dir() else path,
                    f"missing, though this lake committed {_versions(first_recorded, last)}",
                )
        return log.findings
    top = max([*commits, -1 if checkpoint is None else checkpoint[0]])
    first = 0 if checkpoint is None else checkpoint[0] + 1
    missing = [v for v in range(first, top + 1) if v not in commits]
    for version in missing[:3]:
        log.damage(log_dir / f"{version:020d}.json", f"commit {version} of 0-{top} is missing")
    # Commits a checkpoint replaced are read by time travel only, and may go (log retention).
    for version, recorded in sorted(recorded_commits.items()):
        commit = commits.get(version)
        if commit is None:
            if version > top:
                log.damage(
                    log_dir / f"{version:020d}.json",
                    f"commit {version} is missing, though this lake committed it",
                )
        elif version >= first:
            _check_recorded(log, commit, recorded)
    for part in [] if checkpoint is None else checkpoint[1]:
        if part.name in records:
            _check_recorded(log, part, records[part.name])
    if log.findings:
        return log.findings
    # A checkpoint seen for the first time is checked against the commits it replaces.
    replaced = checkpoint is not None and not all(p.name in records for p in checkpoint[1])
    actions = {
        version: _actions(log, commit)
        for version, commit in sorted(commits.items())
        if version >= first or replaced
    }
    if log.findings:
        return log.findings
    if first == 0 and not any("metaData" in a for a in actions.get(0, [])):
        log.damage(commits[0], "commit 0 has no metaData action: the table is not defined")
    files = _replay(log, actions, checkpoint, top)
    if not log.findings:
        _check_files(log, files, footers=name == LEDGER)
    return log.findings


def _versions(first: int, last: int) -> str:
    return f"version {first}" if first == last else f"versions {first}-{last}"


def _check_recorded(log: _Log, commit: Path, recorded: CommitRecord) -> None:
    try:
        data = commit.read_bytes()
    except OSError as error:
        log.damage(commit, f"unreadable: {error.strerror}")
        return
    if len(data) != recorded.size:
        how = f"{len(data)} bytes, {recorded.size} committed"
    elif hashlib.sha256(data).hexdigest() != recorded.sha256:
        how = "same size, other bytes"
    else:
        return
    log.damage(commit, f"differs from what this lake committed ({how})")


def _checkpoint(log: _Log, log_dir: Path) -> tuple[int, list[Path]] | None:
    """The checkpoint the log starts from: `_last_checkpoint`'s, else the newest there is."""
    pointer = log_dir / LAST_CHECKPOINT
    versions: dict[int, list[Path]] = {}
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(log_dir):
            match = _CHECKPOINT_FILE.fullmatch(entry.name)
            if match:
                versions.setdefault(int(match.group(1)), []).append(Path(entry.path))
    try:
        named = json.loads(pointer.read_text(encoding="utf-8"))
        version, parts = int(named["version"]), int(named.get("parts") or 1)
    except FileNotFoundError:
        if not versions:
            return None
        version = max(versions)
        return version, sorted(versions[version])
    except (ValueError, KeyError, TypeError, AttributeError):
        log.damage(pointer, "not a checkpoint pointer (cut or garbled)")
        return None
    found = sorted(versions.get(version, []))
    if len(found) != parts:
        log.damage(pointer, f"names checkpoint {version} in {parts} parts; {len(found)} are there")
        return None
    return version, found


def _actions(log: _Log, commit: Path) -> list[dict[str, Any]]:
    try:
        text = commit.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        log.damage(commit, f"unreadable: {error}")
        return []
    actions: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            action = json.loads(line)
        except json.JSONDecodeError:
            log.damage(commit, f"line {number} is not JSON (cut or garbled)")
            return []
        if not isinstance(action, dict):
            log.damage(commit, f"line {number} is not a Delta action")
            return []
        actions.append(action)
    if not actions:
        log.damage(commit, "empty commit")
    return actions


def _replay(
    log: _Log,
    actions: dict[int, list[dict[str, Any]]],
    checkpoint: tuple[int, list[Path]] | None,
    top: int,
) -> dict[str, int]:
    """Relative path -> size of every file of the newest version."""
    files: dict[str, int] = {}
    start = 0
    if checkpoint is not None:
        version, parts = checkpoint
        files = _checkpoint_files(log, parts)
        start = version + 1
        if all(v in actions for v in range(version + 1)):
            from_commits = _apply({}, actions, 0, version)
            if {unquote(f) for f in from_commits} != {unquote(f) for f in files}:
                log.damage(parts[0], f"disagrees with commits 0-{version} on the table's files")
    return _apply(files, actions, start, top)


def _apply(
    files: dict[str, int], actions: dict[int, list[dict[str, Any]]], start: int, end: int
) -> dict[str, int]:
    for version in range(start, end + 1):
        for action in actions.get(version, []):
            if isinstance(action.get("add"), dict):
                files[str(action["add"].get("path"))] = int(action["add"].get("size") or -1)
            elif isinstance(action.get("remove"), dict):
                files.pop(str(action["remove"].get("path")), None)
    return files


def _checkpoint_files(log: _Log, parts: list[Path]) -> dict[str, int]:
    files: dict[str, int] = {}
    for part in parts:
        try:
            adds = pq.read_table(part, columns=["add"]).column("add").to_pylist()
        except Exception as error:  # noqa: BLE001 - any reader error means a damaged file
            log.damage(part, f"unreadable checkpoint: {error}")
            continue
        files.update({a["path"]: int(a.get("size") or -1) for a in adds if a and a.get("path")})
    return files


def _check_files(log: _Log, files: dict[str, int], *, footers: bool) -> None:
    for logged_path, size in sorted(files.items()):
        if "://" in logged_path or logged_path.startswith("/"):
            continue  # outside the table folder: not the lake's to check
        data_file = log.path / unquote(logged_path)
        try:
            actual = data_file.stat().st_size
        except FileNotFoundError:
            log.damage(data_file, "data file of the current version is missing", RESTORE_FILE)
            continue
        if size >= 0 and actual != size:
            log.damage(data_file, f"{actual} bytes, the log says {size}", RESTORE_FILE)
        elif footers:
            try:
                pq.read_metadata(data_file)
            except Exception as error:  # noqa: BLE001 - any reader error means a damaged file
                log.damage(data_file, f"not readable Parquet: {error}", RESTORE_FILE)


# --- the batch counter and the pending batch ----------------------------------------------------


def check_batch_state(lake: Lake) -> list[Damage]:
    from pipeline.lake.batches import (
        counter_path,
        pending_path,
        read_counter,
        read_pending,
        registered_sequence,
    )

    findings: list[Damage] = []
    counter: int | None = None
    try:
        counter = read_counter(lake)
    except ValueError as error:
        findings.append(Damage(counter_path(lake), str(error), REBUILD_COUNTER))
    try:
        pending = read_pending(lake)
    except ValueError as error:
        findings.append(Damage(pending_path(lake), str(error), RESTORE_PENDING))
        pending = None
    registry = lake.state_dir / "batches"
    if counter is None and registry.is_dir():
        entries = sorted(registry.glob("*.json"))  # what a lost counter is rebuilt from
    elif pending is not None:
        entries = [registry / f"{pending.batch_id}.json"]
    else:
        entries = []
    for entry in entries:
        if entry.exists() and registered_sequence(lake, entry.stem) is None:
            findings.append(
                Damage(entry, "not a batch registry entry (cut or garbled)", RESTORE_FILE)
            )
    return findings
