"""Query results as an aligned text table, CSV or JSON.

Values are turned into text by Spark itself (timestamps in the session zone, UTC, as ISO 8601;
maps, arrays and structs as JSON), so what is printed does not depend on the local zone of the
Python process.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

FORMATS = ("table", "csv", "json")
DEFAULT_TABLE_LIMIT = 1000
MAX_CELL = 60
NULL = "NULL"
TIMESTAMP_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"


@dataclass(frozen=True, slots=True)
class TextResult:
    columns: list[str]
    numeric: list[bool]  # right-aligned in a table
    rows: Iterator[list[str | None]]


def write_result(
    frame: DataFrame, out: TextIO, fmt: str = "table", limit: int | None = None
) -> int:
    """Writes the rows of `frame`; returns how many were written. `limit` None: everything in
    CSV and JSON, the first DEFAULT_TABLE_LIMIT rows in a table; 0: everything."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    if limit is None and fmt == "table":
        limit = DEFAULT_TABLE_LIMIT
    if fmt == "json":
        return write_json(_json_lines(frame, limit), out)
    if fmt == "csv":
        return write_csv(as_text(frame, limit), out)
    # One row more than shown tells whether there were more.
    result = as_text(frame, limit + 1 if limit else None, stream=False)
    rows = list(result.rows)
    more = limit is not None and limit != 0 and len(rows) > limit
    rows = rows[:limit] if more else rows
    out.write(format_table(result.columns, rows, result.numeric))
    note = f"; only the first {limit} shown (--limit 0 shows all)" if more else ""
    out.write(f"({len(rows)} row{'' if len(rows) == 1 else 's'}{note})\n")
    return len(rows)


def as_text(frame: DataFrame, limit: int | None = None, *, stream: bool = True) -> TextResult:
    """Every value as text (None for null). `stream`: fetch partition by partition, for results
    too big to collect at once (one Spark job per partition)."""
    fields = frame.schema.fields
    texts = frame.select(*[_as_string(f.name, f.dataType) for f in fields])
    if limit:
        texts = texts.limit(limit)
    fetched = texts.toLocalIterator() if stream else iter(texts.collect())
    rows = ([None if v is None else str(v) for v in row] for row in fetched)
    return TextResult(
        columns=[f.name for f in fields],
        numeric=[_is_numeric(f.dataType) for f in fields],
        rows=rows,
    )


def format_table(
    columns: Sequence[str], rows: Sequence[Sequence[str | None]], numeric: Sequence[bool]
) -> str:
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [len(c) for c in columns]
    for row in cells:
        widths = [max(w, len(v)) for w, v in zip(widths, row, strict=True)]

    def line(values: Sequence[str], header: bool = False) -> str:
        parts = [
            v.rjust(w) if right and not header else v.ljust(w)
            for v, w, right in zip(values, widths, numeric, strict=True)
        ]
        return " | ".join(parts).rstrip()

    rule = "-+-".join("-" * w for w in widths)
    return "\n".join([line(columns, header=True), rule, *(line(r) for r in cells)]) + "\n"


def write_csv(result: TextResult, out: TextIO) -> int:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(result.columns)
    count = 0
    for row in result.rows:
        writer.writerow(["" if v is None else v for v in row])
        count += 1
    return count


def write_json(lines: Iterable[str], out: TextIO) -> int:
    """A JSON array, one object per line."""
    count = 0
    out.write("[")
    for text in lines:
        out.write(("\n" if count == 0 else ",\n") + text)
        count += 1
    out.write("\n]\n" if count else "]\n")
    return count


def _json_lines(frame: DataFrame, limit: int | None) -> Iterator[str]:
    from pyspark.sql import functions as F

    if limit:
        frame = frame.limit(limit)
    columns = [F.col(f"`{name}`") for name in frame.columns]
    options = {"timestampFormat": TIMESTAMP_FORMAT, "ignoreNullFields": "false"}
    encoded = frame.select(F.to_json(F.struct(*columns), options).alias("j"))
    return (row.j for row in encoded.toLocalIterator())


def _as_string(name: str, data_type: DataType) -> Column:
    from pyspark.sql import functions as F
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        MapType,
        StructType,
        TimestampNTZType,
        TimestampType,
    )

    column = F.col(f"`{name}`")
    if isinstance(data_type, TimestampType):
        text = F.date_format(column, TIMESTAMP_FORMAT)
    elif isinstance(data_type, TimestampNTZType):  # no zone: none is printed
        text = F.date_format(column, TIMESTAMP_FORMAT.removesuffix("XXX"))
    elif isinstance(data_type, ArrayType | MapType | StructType):
        text = F.to_json(column, {"timestampFormat": TIMESTAMP_FORMAT})
    elif isinstance(data_type, BinaryType):
        text = F.base64(column)
    else:
        text = column.cast("string")
    return text.alias(name)


def _is_numeric(data_type: DataType) -> bool:
    from pyspark.sql.types import NumericType

    return isinstance(data_type, NumericType)


def _cell(value: str | None) -> str:
    if value is None:
        return NULL
    text = value.replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t")
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def error_summary(exc: BaseException, query: str | None = None, *, verbose: bool = False) -> str:
    """One line for a failed query: Spark's error class, its message, and where in `query` it
    points (line and column, 1-based, and the fragment). Spark's own text goes on with the
    logical plan; `verbose` gives it whole."""
    if verbose:
        return str(exc) or type(exc).__name__
    condition = _call(exc, "getCondition")
    if not condition:
        text = [line for line in str(exc).splitlines() if line.strip()]
        return text[0] if text else type(exc).__name__
    message = _SPARK_MESSAGE.sub("", _call(exc, "getMessage") or str(exc).splitlines()[0])
    line = f"{condition}: {message}"
    where = _position(exc, query)
    return f"{line} ({where})" if where else line


# "[CLASS] text SQLSTATE: 42703": the class is given apart, the SQL state says no more.
_SPARK_MESSAGE = re.compile(r"^\[[A-Z0-9_.]+\]\s*|\s*SQLSTATE: \w+\s*$")
_LINE_POS = re.compile(r"line (\d+) pos (\d+)")


def _call(exc: BaseException, method: str) -> str | None:
    try:
        value = getattr(exc, method)()
    except Exception:  # noqa: BLE001 - not a Spark error, or one without this detail
        return None
    return str(value) if value else None


def _position(exc: BaseException, query: str | None) -> str | None:
    try:
        contexts = exc.getQueryContext()  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - not a Spark error
        contexts = []
    for context in contexts:
        start, fragment = context.startIndex(), context.fragment()
        if start < 0:
            continue
        if query is not None and query[start : start + len(fragment)] == fragment:
            line = query.count("\n", 0, start) + 1
            column = start - (query.rfind("\n", 0, start) + 1) + 1
            return f"line {line}, column {column}: {fragment}"
        return f"at character {start + 1}: {fragment}"
    found = _LINE_POS.search(str(exc))  # analysis errors without a context name the position
    if found:
        return f"line {found[1]}, column {int(found[2]) + 1}"
    return None
