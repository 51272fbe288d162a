"""A small real filesystem that a test can fill: a tmpfs mounted for the test (needs root, or
the right to mount; the test is skipped with the reason otherwise)."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

FILL_CHUNK = 1 << 20


@contextlib.contextmanager
def mounted_tmpfs(folder: Path, size_mb: int) -> Iterator[Path]:
    """A tmpfs of ``size_mb`` MB at ``folder`` (created), unmounted on the way out."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"a full disk needs a small tmpfs, and mounting one failed: {done.stderr}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=False)


def fill(path: Path) -> int:
    """Write ``path`` until the filesystem has no byte left; returns the bytes written."""
    written = 0
    block = b"\0" * FILL_CHUNK
    with open(path, "wb", buffering=0) as handle:
        for size in (FILL_CHUNK, 4096, 1):
            try:
                while True:
                    written += handle.write(block[:size])
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
        with contextlib.suppress(OSError):
            os.fsync(handle.fileno())
    return written
