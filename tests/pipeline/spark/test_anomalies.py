"""Capture-level anomalies as rows of the anomalies table (`pipeline.spark.anomalies`)."""

from __future__ import annotations

from pipeline.spark.anomalies import capture_anomaly_rows
from pipeline.spark.arrow_rows import row_batch, row_struct


def test_each_bad_record_is_a_row_with_its_file_and_offset() -> None:
    found = [(1, 4096, "corrupt_record: length 70000 past the snapshot length"), (0, None, "x")]
    rows = capture_anomaly_rows(found, ["a.pcap", "b.pcapng"])
    assert [(r["source"], r["kind"], r["file"], r["file_offset"], r["detail"]) for r in rows] == [
        ("capture", "corrupt_record", "b.pcapng", 4096, "length 70000 past the snapshot length"),
        ("capture", "x", "a.pcap", None, ""),
    ]
    assert set(rows[0]) == {field.name for field in row_struct("anomalies")}
    assert row_batch("anomalies", rows).num_rows == 2  # as the writer converts them
