"""The lake's own state found damaged: a run refuses to start on it rather than guess.

Every check that finds a missing, truncated or inconsistent state file (a table's Delta log, the
ledger, the batch counter, carried connection state) raises `DamagedLake` naming the file and the
documented recovery (docs/operations.md, "Damaged lake state"); `stomp-lake doctor` reports the
same without changing anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import StompLakeError

RECOVERY_DOC = "docs/operations.md#damaged-lake-state"


@dataclass(frozen=True)
class Damage:
    """One finding: the file, what is wrong with it, and how to repair it."""

    path: Path
    problem: str
    repair: str

    def line(self) -> str:
        return f"{self.path}: {self.problem}; {self.repair} (see {RECOVERY_DOC})"


class DamagedLake(RuntimeError, StompLakeError):
    """The lake's state cannot be trusted; nothing was changed."""

    exit_code = 5

    def __init__(self, findings: list[Damage]) -> None:
        self.findings = findings
        first = findings[0].line()
        others = len(findings) - 1
        more = f" (and {others} more: stomp-lake doctor lists them)" if others else ""
        super().__init__(f"lake state damaged, refusing to run: {first}{more}")
