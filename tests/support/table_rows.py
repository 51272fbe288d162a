"""Table rows made by hand, as the flow pass would make them."""

from __future__ import annotations

from datetime import date

from pipeline.session.clock import to_datetime
from pipeline.spark.arrow_rows import row_struct


def anomaly_row(day: int, index: int) -> dict:
    """An anomalies row of 2025-01-``day``, the ``index``-th of a capture file."""
    row = dict.fromkeys(f.name for f in row_struct("anomalies"))
    row.update(
        source="capture",
        kind="bad_record_length",
        file="/captures/a.pcap",
        file_offset=index,
        ts=to_datetime(day * 86_400_000_000_000 + index),
        ts_ns=day * 86_400_000_000_000 + index,
        detail=f"record {index}",
        date=date(2025, 1, day),
    )
    return row
