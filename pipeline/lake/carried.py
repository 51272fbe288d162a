"""State of connections still open at the end of a batch, carried to the next batch.

Each batch writes its state to `_state/connections/<batch_id>/`: Parquet parts (flow_key, state,
record_offset: a row per chunk of a connection's state) from Spark, then `_manifest.json`
listing every part with its size, XXH3-128 and row count (no parts: no connection was left open,
an empty state, which is valid). Once the ledger has recorded the batch,
`_state/connections/current.json` is replaced atomically to name the batch and the XXH3-128 of
its manifest, so a batch re-run after a crash starts from the same state as its first attempt.
The first pointer a lake gets also leaves `_state/carried-since.json`, which outlives a deleted
`current.json` or `connections/` folder.

Damage (`check_carried`, and `read_carried`, which refuses rather than read damaged state as
none): `current.json` missing while the lake carried state before (`carried-since.json` is
there, or a state folder of a batch other than the pending one); `current.json` empty or
garbled; the manifest missing or not the one the pointer names; a listed part missing, of
another size or other bytes. A file in the folder the manifest does not list is ignored: only
listed parts are read.

Lakes of earlier releases have pointers without a manifest digest. Such a pointer is accepted
while its folder has no manifest and there is no `carried-since.json` (which this release writes
with its first pointer): its parts must still be readable Parquet (footers read; a deleted part
cannot be told there). The lake's next batch writes a manifest and a full pointer.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import pyarrow.parquet as pq
import xxhash

from pipeline.lake.damage import Damage, DamagedLake
from pipeline.lake.layout import SECRET_DIR_MODE, SECRET_FILE_MODE, Lake, make_private_dir
from pipeline.lake.statefile import read_json, write_json_atomic

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

POINTER = "current.json"
MANIFEST = "_manifest.json"
MARKER = "carried-since.json"
HASH = "xxh3_128"
_CHUNK = 1 << 20

RESTORE_STATE = (
    "restore _state/connections/ and _state/carried-since.json from one backup of the lake, "
    "or give up the carried connections: delete both, and the next run decodes them from where "
    "its captures join them"
)


@dataclass(frozen=True, slots=True)
class _Part:
    """One part as the manifest lists it."""

    file: str
    size: int
    digest: str


@dataclass(frozen=True, slots=True)
class CarriedState:
    """The state the next batch starts from: its batch and Parquet parts (none: empty)."""

    batch_id: str
    parts: tuple[Path, ...]


def _root(lake: Lake) -> Path:
    lake.ensure()
    root = make_private_dir(connections_dir(lake), SECRET_DIR_MODE)
    os.chmod(root, SECRET_DIR_MODE)  # lakes made before it was private
    return root


def connections_dir(lake: Lake) -> Path:
    return lake.state_dir / "connections"


def pointer_path(lake: Lake) -> Path:
    return connections_dir(lake) / POINTER


def marker_path(lake: Lake) -> Path:
    return lake.state_dir / MARKER


def current_state_batch(lake: Lake) -> str | None:
    """The batch the next batch starts from, None when the lake never carried state;
    DamagedLake when the state cannot be trusted."""
    state = current_state(lake)
    return None if state is None else state.batch_id


def current_state(lake: Lake) -> CarriedState | None:
    """The state the next batch starts from, verified; None when the lake never carried state;
    DamagedLake when the state cannot be trusted."""
    _root(lake)
    return _verified(lake)


def read_carried(spark: SparkSession, lake: Lake) -> DataFrame | None:
    """Carried state rows (record_type='state', flow_key, state, record_offset), or None when
    there are none; DamagedLake when the state is damaged (never read as none)."""
    from pyspark.sql import functions as F

    state = _verified(lake)
    if state is None or not state.parts:
        return None
    rows = spark.read.parquet(*(str(part) for part in state.parts))
    # a row per chunk of a connection's state, in order; an earlier release wrote one a
    # connection, without the column, and its state is refused as incompatible when read
    order = F.col("record_offset") if "record_offset" in rows.columns else F.lit(0)
    return rows.select(
        F.lit("state").alias("record_type"),
        "flow_key",
        "state",
        order.cast("long").alias("record_offset"),
    )


def write_carried(state_rows: DataFrame | None, lake: Lake, batch_id: str) -> None:
    """The batch's state rows (flow_key, state, record_offset), or no rows (None: no connection
    was left open, known without a Spark job), then the folder's manifest."""
    folder = _root(lake) / batch_id
    if state_rows is None:
        shutil.rmtree(folder, ignore_errors=True)  # as the writer's overwrite
        make_private_dir(folder, SECRET_DIR_MODE)
    else:
        rows = state_rows.select("flow_key", "state", "record_offset")
        rows.write.mode("overwrite").parquet(str(folder))
    _make_secret(folder)
    parts = [
        {"file": part.name, "size": part.stat().st_size, HASH: _digest(part), "rows": _rows(part)}
        for part in _data_files(folder)
    ]
    write_json_atomic(folder / MANIFEST, {"batch_id": batch_id, "parts": parts})


def _make_secret(folder: Path) -> None:
    """Spark's writer creates files with the JVM's umask (0644 as a rule): the state holds raw
    bytes of frames in progress and the passcodes seen on open connections, so 0700/0600."""
    os.chmod(folder, SECRET_DIR_MODE)
    for parent, dirs, files in os.walk(folder):
        for name in dirs:
            os.chmod(os.path.join(parent, name), SECRET_DIR_MODE)
        for name in files:
            os.chmod(os.path.join(parent, name), SECRET_FILE_MODE)


def advance(lake: Lake, batch_id: str) -> None:
    """Point the next batch at this batch's state (its manifest written by `write_carried`)."""
    root = _root(lake)
    manifest = _digest(root / batch_id / MANIFEST)
    write_json_atomic(root / POINTER, {"batch_id": batch_id, "manifest": {HASH: manifest}})
    if not marker_path(lake).exists():
        since = datetime.now(UTC).isoformat(timespec="seconds")
        write_json_atomic(marker_path(lake), {"first_batch": batch_id, "since": since})


def check_carried(lake: Lake) -> list[Damage]:
    """What is wrong with the carried state (no Spark: sizes, small files hashed)."""
    try:
        _verified(lake)
    except DamagedLake as damaged:
        return damaged.findings
    return []


def _verified(lake: Lake) -> CarriedState | None:
    pointer = _read_pointer(lake)
    if pointer is None:
        return None
    batch_id, manifest_digest = pointer
    folder = connections_dir(lake) / batch_id
    manifest_path = folder / MANIFEST
    if manifest_digest is None:
        if manifest_path.exists() or marker_path(lake).exists():
            _refuse(pointer_path(lake), "names no manifest, though this release wrote the state")
        return _legacy(folder, batch_id)
    try:
        data = manifest_path.read_bytes()
    except FileNotFoundError:
        _refuse(manifest_path, f"missing: the state of batch {batch_id} cannot be verified")
    except OSError as error:
        _refuse(manifest_path, f"unreadable: {error.strerror}")
    if xxhash.xxh3_128_hexdigest(data) != manifest_digest:
        _refuse(manifest_path, f"is not the manifest {POINTER} names (changed or replaced)")
    entries = _manifest_parts(manifest_path, data)
    findings = []
    for entry in entries:
        part = folder / entry.file
        try:
            if not part.is_file():
                findings.append(Damage(part, "carried state part missing", RESTORE_STATE))
            elif (size := part.stat().st_size) != entry.size:
                how = f"{size} bytes, the manifest says {entry.size}"
                findings.append(
                    Damage(part, f"carried state part cut or grown ({how})", RESTORE_STATE)
                )
            elif _digest(part) != entry.digest:
                how = "same size, other bytes"
                findings.append(Damage(part, f"carried state part changed ({how})", RESTORE_STATE))
        except OSError as error:
            findings.append(
                Damage(part, f"carried state part unreadable: {error.strerror}", RESTORE_STATE)
            )
    if findings:
        raise DamagedLake(findings)
    return CarriedState(batch_id, tuple(folder / entry.file for entry in entries))


def _read_pointer(lake: Lake) -> tuple[str, str | None] | None:
    """(batch id, manifest digest; None for a pointer of an earlier release), or None when the
    lake never carried state."""
    path = pointer_path(lake)
    try:
        data = read_json(path)
    except ValueError as error:
        _refuse(path, f"not a state pointer (empty, cut or garbled): {error}")
    except OSError as error:
        _refuse(path, f"unreadable: {error.strerror}")
    if data is None:
        evidence = _carried_before(lake)
        if evidence:
            _refuse(path, f"missing, though {evidence}: the connections carried would be lost")
        return None
    batch_id = data.get("batch_id") if isinstance(data, dict) else None
    manifest = data.get("manifest") if isinstance(data, dict) else None
    digest = manifest.get(HASH) if isinstance(manifest, dict) else None
    if not isinstance(batch_id, str) or not _plain_name(batch_id):
        _refuse(path, "not a state pointer (no batch id)")
    if manifest is not None and not isinstance(digest, str):
        _refuse(path, f"not a state pointer (no {HASH} of the manifest)")
    return batch_id, digest


def _carried_before(lake: Lake) -> str | None:
    """Why the lake must have a pointer, or None when it never had one."""
    marker = marker_path(lake)
    if marker.exists():
        return f"_state/{MARKER} says this lake carries state"
    from pipeline.lake.batches import pending_path

    pending = None
    try:
        data = read_json(pending_path(lake))
        pending = data.get("batch_id") if isinstance(data, dict) else None
    except (ValueError, OSError):
        pass  # the batch state check reports it
    root = connections_dir(lake)
    if root.is_dir():
        for entry in sorted(os.scandir(root), key=lambda e: e.name):
            if entry.is_dir() and entry.name != pending:
                return f"batch {entry.name} wrote carried state here"
    return None


def _manifest_parts(path: Path, data: bytes) -> list[_Part]:
    try:
        parts = json.loads(data)["parts"]
        entries = [_Part(str(p["file"]), int(p["size"]), str(p[HASH])) for p in parts]
    except (ValueError, KeyError, TypeError) as error:
        _refuse(path, f"not a state manifest: {error!r}")
    if not all(_plain_name(e.file) for e in entries):
        _refuse(path, "not a state manifest (a part outside its folder)")
    return entries


def _legacy(folder: Path, batch_id: str) -> CarriedState:
    """A pointer and folder from a release without manifests: the parts there, if readable."""
    if not folder.is_dir():
        _refuse(folder, f"missing: the state of batch {batch_id} the pointer names")
    parts = _data_files(folder)
    findings = []
    for part in parts:
        try:
            pq.read_metadata(part)
        except Exception as error:  # noqa: BLE001 - any reader error means a damaged file
            problem = f"carried state part not readable Parquet: {error}"
            findings.append(Damage(part, problem, RESTORE_STATE))
    if findings:
        raise DamagedLake(findings)
    return CarriedState(batch_id, tuple(parts))


def _data_files(folder: Path) -> list[Path]:
    """The files Spark reads in a folder: not hidden, not starting with '_'."""
    return sorted(
        Path(e.path)
        for e in os.scandir(folder)
        if e.is_file() and not e.name.startswith((".", "_"))
    )


def _plain_name(name: str) -> bool:
    return bool(name) and "/" not in name and name not in (".", "..")


def _digest(path: Path) -> str:
    hasher = xxhash.xxh3_128()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            hasher.update(chunk)
    return hasher.hexdigest()


def _rows(part: Path) -> int | None:
    try:
        return int(pq.read_metadata(part).num_rows)
    except Exception:  # noqa: BLE001 - not Parquet: the count is only informative
        return None


def _refuse(path: Path, problem: str) -> NoReturn:
    raise DamagedLake([Damage(path, problem, RESTORE_STATE)])
