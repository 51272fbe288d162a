"""Small JSON state files written atomically (temp file, fsync, rename), so a kill leaves either
the old or the new content, never a torn one."""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from pathlib import Path
from typing import Any

from pipeline.lake.layout import SECRET_FILE_MODE


def write_json_atomic(path: Path, data: Any, *, mode: int = SECRET_FILE_MODE) -> None:
    temp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
        raise
    _fsync_dir(path.parent)


def read_json(path: Path) -> Any | None:
    """The file's JSON, or None when it does not exist; ValueError when it is not JSON (empty,
    cut or garbled): a damaged state file never reads as a missing one."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
