"""Where things live inside a lake root, and how they are kept private.

    <root>/tables/<name>/   one Delta table per name (partition folders, _delta_log/, _staging/)
    <root>/_ledger/         the ingestion ledger, a Delta table too
    <root>/_state/          lock file, batch registry, pending batch (0700)
    <root>/_quarantine/     inputs set aside as unusable
    <root>/_runs/           per-run reports
    <root>/docs/            generated documentation (data docs)

The lake holds message metadata and logins: folders are 0750 (0700 for _state), files 0640
(0600 for _state).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pipeline.errors import UsageError

LEDGER = "_ledger"
STAGING = "_staging"
DELTA_LOG = "_delta_log"

PRIVATE_UMASK = 0o027
DIR_MODE = 0o750
FILE_MODE = 0o640
SECRET_DIR_MODE = 0o700
SECRET_FILE_MODE = 0o600

_TABLE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,127}")


@contextmanager
def private_umask() -> Iterator[None]:
    """Files and folders created inside (by this process, e.g. delta-rs) are not world-readable."""
    previous = os.umask(PRIVATE_UMASK)
    try:
        yield
    finally:
        os.umask(previous)


def make_private_dir(path: Path, mode: int = DIR_MODE) -> Path:
    """mkdir -p, with `mode` on every folder this call creates."""
    missing: list[Path] = []
    current = path
    while not current.exists():
        missing.append(current)
        current = current.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=mode)
        except FileExistsError:
            continue
        os.chmod(folder, mode)  # mkdir's mode is filtered by the umask
    return path


def make_tree_private(folder: Path, dir_mode: int = DIR_MODE, file_mode: int = FILE_MODE) -> Path:
    """Modes of a folder and all below it: for what Spark wrote, since the JVM creates files with
    its own umask (0644 and 0755 as a rule) whatever this process's umask is."""
    if not folder.exists():
        return folder
    os.chmod(folder, dir_mode)
    for parent, dirs, files in os.walk(folder):
        for name in dirs:
            os.chmod(os.path.join(parent, name), dir_mode)
        for name in files:
            path = os.path.join(parent, name)
            if not os.path.islink(path):
                os.chmod(path, file_mode)
    return folder


def validate_table_name(name: str) -> str:
    if not _TABLE_NAME.fullmatch(name):
        raise ValueError(
            f"bad table name {name!r}: use a letter then letters, digits or '_' (at most 128)"
        )
    return name


class BadLakeRoot(UsageError, ValueError):
    """The lake root cannot be used (a name delta-rs misreads, or a folder that cannot be made)."""


class Lake:
    """Paths inside one lake root. Creating a Lake touches nothing; `ensure()` creates folders."""

    __slots__ = ("root",)

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).absolute()
        if any(c in str(self.root) for c in "\\%"):
            # delta-rs splits paths on a backslash and decodes %XX in them.
            raise BadLakeRoot(f"lake root {self.root} may not contain '\\' or '%'")

    def __repr__(self) -> str:
        return f"Lake({str(self.root)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Lake) and other.root == self.root

    def __hash__(self) -> int:
        return hash(self.root)

    @property
    def tables_dir(self) -> Path:
        return self.root / "tables"

    @property
    def ledger_path(self) -> Path:
        return self.root / LEDGER

    @property
    def state_dir(self) -> Path:
        return self.root / "_state"

    @property
    def quarantine_dir(self) -> Path:
        return self.root / "_quarantine"

    @property
    def runs_dir(self) -> Path:
        return self.root / "_runs"

    @property
    def docs_dir(self) -> Path:
        return self.root / "docs"

    @property
    def lock_path(self) -> Path:
        return self.state_dir / "lake.lock"

    def table_path(self, name: str) -> Path:
        return self.tables_dir / validate_table_name(name)

    def delta_path(self, name: str) -> Path:
        """A data table by name, or the ledger by its name `_ledger`."""
        return self.ledger_path if name == LEDGER else self.table_path(name)

    def staging_dir(self, name: str) -> Path:
        return self.delta_path(name) / STAGING

    def table_names(self) -> list[str]:
        """Names of the data tables that have a Delta log, sorted."""
        if not self.tables_dir.is_dir():
            return []
        return sorted(
            entry.name
            for entry in self.tables_dir.iterdir()
            if _TABLE_NAME.fullmatch(entry.name) and (entry / DELTA_LOG).is_dir()
        )

    def ensure(self) -> Lake:
        try:
            for folder in (self.root, self.tables_dir, self.quarantine_dir, self.runs_dir):
                make_private_dir(folder)
            make_private_dir(self.state_dir, SECRET_DIR_MODE)
        except OSError as error:  # e.g. a regular file where a folder should be
            reason = error.strerror or type(error).__name__
            raise BadLakeRoot(
                f"cannot use {self.root} as a lake: {reason}: {error.filename}"
            ) from error
        return self
