"""What validating a batch found: the report `pipeline.validation.gate` writes and prints, and
the error a failing batch raises."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pipeline.errors import StompLakeError
from pipeline.validation.results import ExpectationOutcome


@dataclass(slots=True)
class ValidationReport:
    batch_id: str
    success: bool
    outcomes: list[ExpectationOutcome]
    elapsed_s: float
    docs_index: Path | None
    result_path: Path
    quarantine_path: Path | None = None
    timings_s: dict[str, float] = field(default_factory=dict)

    @property
    def failures(self) -> list[ExpectationOutcome]:
        return [o for o in self.outcomes if not o.success]

    def to_json(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "success": self.success,
            "elapsed_s": round(self.elapsed_s, 3),
            "timings_s": {k: round(v, 3) for k, v in self.timings_s.items()},
            "evaluated": len(self.outcomes),
            "failed": len(self.failures),
            "docs_index": None if self.docs_index is None else str(self.docs_index),
            "quarantine_path": None if self.quarantine_path is None else str(self.quarantine_path),
            "failures": [asdict(o) for o in self.failures],
            "outcomes": [
                {"suite": o.suite, "expectation": o.expectation, "success": o.success}
                for o in self.outcomes
            ],
        }

    def describe(self) -> str:
        head = (
            f"batch {self.batch_id}: {len(self.failures)} of {len(self.outcomes)} "
            f"expectations failed"
        )
        lines = [head]
        for failure in self.failures:
            lines.append(f"  - {failure.describe()}")
            lines.extend(f"      {json.dumps(row, default=str)}" for row in failure.samples)
        if self.quarantine_path is not None:
            lines.append(f"quarantined batch: {self.quarantine_path}")
        if self.docs_index is not None:
            lines.append(f"data docs: {self.docs_index}")
        lines.append(f"validation result: {self.result_path}")
        return "\n".join(lines)


class ValidationFailed(StompLakeError):
    exit_code = 4

    def __init__(self, report: ValidationReport) -> None:
        super().__init__(report.describe())
        self.report = report
