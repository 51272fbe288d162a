"""One run at a time per lake: an exclusive flock on the lake's root folder itself.

A lock on a file can be stolen by deleting the file (the next run locks a new inode); the root
folder cannot be removed while the lake is in it. <lake>/_state/lake.lock is locked too (what
earlier releases locked) and holds who the holder is, so a refused run can say who is in the way.
The kernel drops a flock when its holder dies, even by SIGKILL, so a lock can never go stale.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from pipeline.errors import StompLakeError
from pipeline.lake.layout import SECRET_FILE_MODE, Lake

_held_by_this_process: set[str] = set()


class LakeBusy(RuntimeError, StompLakeError):
    """Another run holds the lake."""

    exit_code = 3

    def __init__(self, lake: Lake, holder: dict[str, Any] | None, waited: float) -> None:
        self.lake = lake
        self.holder = holder
        self.waited = waited
        super().__init__(_busy_message(lake, holder, waited))


def _busy_message(lake: Lake, holder: dict[str, Any] | None, waited: float) -> str:
    who = (
        f"pid {holder.get('pid')} on {holder.get('host')}, started {holder.get('started')}, "
        f"command: {holder.get('command')}"
        if holder
        else "holder not recorded yet"
    )
    return (
        f"lake {lake.root} is busy: another stomp-lake run holds {lake.lock_path} ({who}); "
        f"gave up after waiting {waited:g}s. Retry later or pass a longer wait."
    )


def holds_lake_lock(lake: Lake) -> bool:
    """True when this process is inside `lake_lock(lake)`."""
    return str(lake.root) in _held_by_this_process


def read_lock_holder(lake: Lake) -> dict[str, Any] | None:
    try:
        text = lake.lock_path.read_text(encoding="utf-8")
        return json.loads(text) if text.strip() else None
    except (FileNotFoundError, json.JSONDecodeError):
        return None


@contextmanager
def lake_lock(lake: Lake, *, wait: float = 0, poll_seconds: float = 0.1) -> Iterator[None]:
    """Hold the lake exclusively; wait up to `wait` seconds for another holder, then LakeBusy."""
    lake.ensure()
    root_fd = os.open(lake.root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fd = os.open(lake.lock_path, os.O_RDWR | os.O_CREAT, SECRET_FILE_MODE)
        try:
            if _acquire((root_fd, fd), wait, poll_seconds) is None:
                raise LakeBusy(lake, read_lock_holder(lake), wait)
            _write_holder(fd)
            _held_by_this_process.add(str(lake.root))
            try:
                yield
            finally:
                _held_by_this_process.discard(str(lake.root))
                os.ftruncate(fd, 0)
                fcntl.flock(fd, fcntl.LOCK_UN)
                fcntl.flock(root_fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
    finally:
        os.close(root_fd)


def _acquire(fds: tuple[int, ...], wait: float, poll_seconds: float) -> float | None:
    """Seconds waited for all of `fds`, or None when one stayed taken for `wait` seconds (the
    others then released)."""
    started = time.monotonic()
    while True:
        taken: list[int] = []
        try:
            for fd in fds:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                taken.append(fd)
            return time.monotonic() - started
        except BlockingIOError:
            for fd in taken:
                fcntl.flock(fd, fcntl.LOCK_UN)
            remaining = wait - (time.monotonic() - started)
            if remaining <= 0:
                return None
            time.sleep(min(poll_seconds, remaining))


def _write_holder(fd: int) -> None:
    holder = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv)[:300],
    }
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(holder).encode(), 0)
