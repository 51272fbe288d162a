"""Capture-level anomalies (bad files, cut records) as rows of the `anomalies` table."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime


def capture_anomaly_rows(
    found: Iterable[tuple[int, int | None, str]], paths: Sequence[str]
) -> list[dict]:
    """A row of the `anomalies` table for each bad record the capture pass met (``found``:
    file id, record offset, "kind: detail", as `pipeline.spark.summary.capture_summary`
    collects them with the stats), for the run to write beside the flow pass's files."""
    from pipeline.spark.arrow_rows import row_struct

    names = [field.name for field in row_struct("anomalies")]
    today = datetime.now(UTC).date()
    rows = []
    for file_id, record_offset, text in found:
        kind, _, detail = text.partition(": ")
        row = dict.fromkeys(names)
        row.update(
            source="capture",
            kind=kind,
            file=paths[file_id],
            file_offset=record_offset,
            detail=detail,
            date=today,
        )
        rows.append(row)
    return rows
