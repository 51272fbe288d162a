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


def frame_row(index: int) -> dict:
    """A frames row of 2025-01-15: the ``index``-th SEND of one connection."""
    ts_ns = 1_736_935_200_000_000_000 + index
    row = dict.fromkeys(f.name for f in row_struct("frames"))
    row.update(
        session_id="s-1",
        direction="c2s",
        frame_index=index,
        ts=to_datetime(ts_ns),
        ts_ns=ts_ns,
        ts_end=to_datetime(ts_ns),
        ts_end_ns=ts_ns,
        command="SEND",
        headers={"destination": "/queue/a", "message-id": f"m-{index}"},
        header_list=[
            {"name": "destination", "value": "/queue/a"},
            {"name": "message-id", "value": f"m-{index}"},
        ],
        body_length=0,
        stream_offset=30 * index,
        frame_length=30,
        tcp_offset=30 * index,
        date=date(2025, 1, 15),
    )
    return row
