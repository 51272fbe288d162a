"""Delta file statistics (numRecords, minValues, maxValues, nullCount) from a Parquet footer.

Only the footer is used, never the data. Conventions follow Delta writers: the first 32 columns,
top-level primitive columns only, timestamps at millisecond precision (min rounded down, max
rounded up so the bounds stay true), strings cut to a 32-character prefix for the minimum and the
maximum left out when longer, no min/max for binary, decimal or non-finite floats.

No min/max either for a column of free text (`FREE_TEXT_COLUMNS`): statistics copy values into
Parquet footers and the Delta log, out of reach of what reads and masks rows. Those columns
are masked before they are written (`pipeline.session.privacy.scrub`), but by pattern, and a
secret spelled some way no pattern knows must not be copied again where a table's readers,
compaction and vacuum do not look. Nobody filters on them, so files skipped on their bounds
are not missed.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

MAX_STATS_COLUMNS = 32
STRING_PREFIX = 32
# Free text a client, a broker or the capture wrote (names are unique across the tables):
# the WebSocket upgrade's URL and headers, close reasons, anomaly details, ERROR messages,
# body previews.
FREE_TEXT_COLUMNS: frozenset[str] = frozenset(
    {
        "ws_path",
        "ws_origin",
        "ws_user_agent",
        "ws_close_reason",
        "close_reason",
        "detail",
        "message",
        "body_preview",
    }
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_TO_MICROS = {"s": (1_000_000, 1), "ms": (1000, 1), "us": (1, 1), "ns": (1, 1000)}


def file_stats(
    metadata: pq.FileMetaData, *, max_columns: int = MAX_STATS_COLUMNS
) -> dict[str, Any]:
    stats: dict[str, Any] = {
        "numRecords": metadata.num_rows,
        "minValues": {},
        "maxValues": {},
        "nullCount": {},
    }
    leaf_of = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
    for field in list(metadata.schema.to_arrow_schema())[:max_columns]:
        leaf = leaf_of.get(field.name)
        if leaf is None:  # nested column: several leaves, no flat stats
            continue
        nulls, low, high = _column_summary(metadata, leaf, field.type)
        if nulls is not None:
            stats["nullCount"][field.name] = nulls
        if field.name in FREE_TEXT_COLUMNS:
            continue
        if low is not None:
            encoded = _encode(field.type, low, upper=False)
            if encoded is not None:
                stats["minValues"][field.name] = encoded
        if high is not None:
            encoded = _encode(field.type, high, upper=True)
            if encoded is not None:
                stats["maxValues"][field.name] = encoded
    return stats


def _column_summary(
    metadata: pq.FileMetaData, leaf: int, kind: pa.DataType
) -> tuple[int | None, Any, Any]:
    """(null count, min, max) over all row groups; None where some row group lacks it."""
    nulls: int | None = 0
    low: Any = None
    high: Any = None
    bounds_known = True
    for group in range(metadata.num_row_groups):
        statistics = metadata.row_group(group).column(leaf).statistics
        if statistics is None:
            return None, None, None
        if nulls is not None:
            nulls = nulls + statistics.null_count if statistics.has_null_count else None
        bounds = _bounds(statistics, kind) if statistics.has_min_max else None
        if bounds is not None:
            low = bounds[0] if low is None else min(low, bounds[0])
            high = bounds[1] if high is None else max(high, bounds[1])
        elif statistics.num_values > 0:  # values present but no usable bounds
            bounds_known = False
    if not bounds_known:
        return nulls, None, None
    return nulls, low, high


def _bounds(statistics: pq.Statistics, kind: pa.DataType) -> tuple[Any, Any] | None:
    if pa.types.is_timestamp(kind) or pa.types.is_date32(kind):
        # Epoch units straight from the footer: exact and comparable. INT96 has no such form.
        if statistics.physical_type not in ("INT64", "INT32"):
            return None
        return statistics.min_raw, statistics.max_raw
    try:
        low, high = statistics.min, statistics.max
    except (UnicodeDecodeError, ValueError):
        return None
    if low is None or high is None:
        return None
    if pa.types.is_floating(kind) and not (math.isfinite(low) and math.isfinite(high)):
        return None  # JSON has no NaN/Infinity
    return low, high


def _encode(kind: pa.DataType, value: Any, *, upper: bool) -> Any:
    if value is None:
        return None
    if pa.types.is_timestamp(kind):
        return _timestamp(int(value), kind.unit, utc=kind.tz is not None, upper=upper)
    if pa.types.is_date32(kind):
        return (_EPOCH + timedelta(days=int(value))).date().isoformat()
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        return value
    if pa.types.is_floating(kind):
        return float(value)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        if len(value) <= STRING_PREFIX:
            return value
        return None if upper else value[:STRING_PREFIX]
    return None


def _timestamp(raw: int, unit: str, *, utc: bool, upper: bool) -> str:
    multiply, divide = _TO_MICROS[unit]
    micros = raw * multiply
    micros = -(-micros // divide) if upper else micros // divide
    millis = -(-micros // 1000) if upper else micros // 1000
    moment = _EPOCH + timedelta(milliseconds=millis)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}"
    return text + "Z" if utc else text
