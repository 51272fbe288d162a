"""Payload bytes read back from the capture files by offset.

Read with `os.pread` rather than from a memory map: the flow pass reads payloads of all the
batch's files in flow order, and mapped pages would count in the task's resident memory until
the map is closed, so a task's memory would grow with the batch's bytes. Page-cache pages read
by `pread` belong to no process.
"""

from __future__ import annotations

import os


class PayloadFiles:
    """Capture files opened once per task; `read` returns the bytes at an offset."""

    def __init__(self, paths: tuple[str, ...]) -> None:
        self.paths = paths
        self._fds: dict[int, int] = {}

    def read(self, file_id: int, offset: int, length: int) -> bytes:
        return os.pread(self.fd(file_id), length, offset)

    def fd(self, file_id: int) -> int:
        """The file's descriptor, open until `close`."""
        fd = self._fds.get(file_id)
        if fd is None:
            fd = self._fds[file_id] = os.open(self.paths[file_id], os.O_RDONLY)
        return fd

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
