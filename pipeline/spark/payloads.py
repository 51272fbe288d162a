"""Payload bytes read back from the capture files by offset, each file mapped once per task."""

from __future__ import annotations

import mmap


class PayloadFiles:
    """Capture files mapped once per task; payloads are slices of the maps."""

    def __init__(self, paths: tuple[str, ...]) -> None:
        self.paths = paths
        self._maps: dict[int, mmap.mmap | bytes] = {}

    def read(self, file_id: int, offset: int, length: int) -> bytes:
        buf = self._maps.get(file_id)
        if buf is None:
            with open(self.paths[file_id], "rb") as handle:
                try:
                    buf = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
                except ValueError:  # empty file
                    buf = b""
            self._maps[file_id] = buf
        return buf[offset : offset + length]

    def close(self) -> None:
        for buf in self._maps.values():
            if isinstance(buf, mmap.mmap):
                buf.close()
        self._maps.clear()
