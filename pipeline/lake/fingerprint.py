"""What identifies an input file: where it is, its size and mtime, and a hash of its content."""

from __future__ import annotations

import hashlib
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class FileFingerprint:
    path: str  # absolute
    size: int
    mtime_ns: int
    sha256: str

    @property
    def stat_key(self) -> tuple[str, int, int]:
        return (self.path, self.size, self.mtime_ns)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FileFingerprint:
        return cls(
            path=str(data["path"]),
            size=int(data["size"]),
            mtime_ns=int(data["mtime_ns"]),
            sha256=str(data["sha256"]),
        )


def stat_key(path: str | Path) -> tuple[str, int, int]:
    """(absolute path, size, mtime_ns) without reading the content; OSError when unreadable."""
    absolute = os.path.abspath(path)
    info = os.stat(absolute)
    if not os.path.isfile(absolute):
        raise IsADirectoryError(f"not a regular file: {absolute}")
    return (absolute, info.st_size, info.st_mtime_ns)


def sha256_of(path: str | Path) -> str:
    """Streamed: memory stays flat whatever the file size."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


class FileChangedWhileReading(OSError):
    """The file's size or mtime moved while it was hashed: it is still being written."""


def fingerprint(path: str | Path) -> FileFingerprint:
    before = stat_key(path)
    digest = sha256_of(before[0])
    if stat_key(before[0]) != before:
        raise FileChangedWhileReading(f"file changed while being hashed: {before[0]}")
    return FileFingerprint(*before, sha256=digest)
