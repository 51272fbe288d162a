"""Fixtures for the lake tests: a fresh lake and a small partitioned schema with its rows."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from pipeline.lake.layout import Lake

EVENTS_ARROW = pa.schema(
    [
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("session", pa.string()),
        pa.field("seq", pa.int64()),
        pa.field("body", pa.string()),
        pa.field("date", pa.date32()),
    ]
)


def event_rows(batch: int, count: int = 6) -> list[dict]:
    """Rows on both sides of midnight (3 + 3 by default), with a null, a long string and
    sub-millisecond timestamps."""
    start = datetime(2026, 11, 21, 23, 59, 59, 997_001, tzinfo=UTC)
    rows = []
    for i in range(count):
        ts = start + timedelta(microseconds=1_000 * i + 7 * batch)
        rows.append(
            {
                "ts": ts,
                "session": f"s{batch}-{i % 2}",
                "seq": batch * 100 + i,
                "body": None if i == 4 else ("x" * 40 if i == 2 else f"b{i}"),
                "date": ts.date(),
            }
        )
    return rows


def forget_staging() -> None:
    """What a killed process loses: its record of batches in flight (its files stay behind)."""
    from pipeline.lake import staging

    staging._active_staging.clear()


def sort_rows(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: r["seq"])


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return Lake(tmp_path / "lake").ensure()


@pytest.fixture(scope="session")
def events_spark_schema():
    from pipeline.lake.table_schema import to_spark_schema

    return to_spark_schema(EVENTS_ARROW)


def events_frame(spark, rows: list[dict], schema):
    return spark.createDataFrame([tuple(r.values()) for r in rows], schema)


DAY_ONE = date(2026, 11, 21)


def runs_python(frame) -> bool:
    """Whether computing the frame runs Python tasks (a PythonRDD in its RDD lineage)."""
    return "PythonRDD" in frame._jdf.queryExecution().toRdd().toDebugString()
