"""The lake's tables as Spark temporary views, optionally cut to a time window.

Every table of the lake is registered under its name. The tables the pipeline defines
(``schemas.TABLES``) are always registered, empty when the lake has not written them yet, so a
saved query never fails on a young lake.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import schemas
from pipeline.lake import Lake, read_table

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

# Each table's own time: a row is in a window when this time is. Sessions, subscriptions and
# transactions are spans: they are in a window when they overlap it.
_SPANS: dict[str, tuple[str, str]] = {
    "sessions": ("started_at", "ended_at"),
    "subscriptions": ("subscribed_at", "unsubscribed_at"),
    "transactions": ("began_at", "ended_at"),
}
_INSTANTS: dict[str, str] = {
    "frames": "ts",
    "messages": "ts",
    "acks": "ts",
    "heartbeats": "ts",
    "errors": "ts",
    "anomalies": "ts",
    "receipts": "requested_at",
}
# Tables whose `date` partition is the UTC date of the instant above: the window prunes them.
_DATE_OF_INSTANT = frozenset(_INSTANTS) - {"receipts", "anomalies"}


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """[since, until) in UTC; either end may be open."""

    since: datetime | None = None
    until: datetime | None = None

    def __post_init__(self) -> None:
        if self.since and self.until and self.since >= self.until:
            raise ValueError(f"--since {self.since} is not before --until {self.until}")

    @property
    def is_open(self) -> bool:
        return self.since is None and self.until is None


def parse_time(text: str) -> datetime:
    """An ISO 8601 date or date-time; without an offset it is UTC."""
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"expected an ISO date or date-time, got {text!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def table_names(lake: Lake) -> list[str]:
    """The pipeline's tables first, in their usual order, then any other table of the lake."""
    others = [name for name in lake.table_names() if name not in schemas.TABLES]
    return [*schemas.TABLES, *others]


def read_lake_table(
    spark: SparkSession, lake: Lake, name: str, window: TimeWindow | None = None
) -> DataFrame:
    schema = schemas.load(name).spark_schema() if name in schemas.TABLES else None
    frame = read_table(spark, lake, name, schema=schema)
    if window is None or window.is_open:
        return frame
    condition = _window_condition(name, window)
    return frame if condition is None else frame.where(condition)


def register_views(spark: SparkSession, lake: Lake, window: TimeWindow | None = None) -> list[str]:
    """Registers every table as a temporary view under its name; returns the names."""
    names = table_names(lake)
    for name in names:
        read_lake_table(spark, lake, name, window).createOrReplaceTempView(name)
    return names


def _window_condition(name: str, window: TimeWindow) -> Column | None:
    from pyspark.sql import functions as F

    # Aware datetimes: PySpark converts them to instants exactly (naive ones go through the
    # Python process's local zone).
    since, until = window.since, window.until
    conditions: list[Column] = []
    if name in _SPANS:
        start, end = _SPANS[name]
        if until is not None:
            conditions.append(F.col(start) < F.lit(until))
        if since is not None:
            conditions.append(F.col(end).isNull() | (F.col(end) >= F.lit(since)))
    elif name in _INSTANTS:
        at = F.col(_INSTANTS[name])
        if name == "receipts":
            at = F.coalesce(at, F.col("received_at"))
        if name == "anomalies":  # capture-level anomalies may have no time: their batch date
            at = F.coalesce(at, F.col("date").cast("timestamp"))
        if since is not None:
            conditions.append(at >= F.lit(since))
        if until is not None:
            conditions.append(at < F.lit(until))
        if name in _DATE_OF_INSTANT:
            conditions.extend(_date_pruning(window))
    else:
        return None
    result = conditions[0]
    for condition in conditions[1:]:
        result = result & condition
    return result


def _date_pruning(window: TimeWindow) -> list[Column]:
    from pyspark.sql import functions as F

    pruning = []
    if window.since is not None:
        pruning.append(F.col("date") >= F.lit(window.since.date()))
    if window.until is not None:
        last = window.until - timedelta(microseconds=1)
        pruning.append(F.col("date") <= F.lit(last.date()))
    return pruning
