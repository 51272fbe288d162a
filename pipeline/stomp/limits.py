"""Size limits that keep a decoder's memory bounded (defaults follow ActiveMQ's)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class Limits:
    max_command: int = 1024  # bytes on the command line, EOL excluded
    max_header_line: int = 10240  # bytes on one header line, EOL excluded
    max_headers: int = 1000
    max_body: int = 100 * 1024 * 1024

    def head_always_within(self) -> int:
        """A header block (EOLs included) at most this long cannot break the line/count limits,
        so the decoder can skip checking its lines one by one."""
        return min(self.max_header_line, 2 * self.max_headers)
