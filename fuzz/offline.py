"""The run's per-file and per-flow passes without Spark, for fuzzing whole captures.

Mirrors what `pipeline.spark` does around the pure-Python parts: every split of every file is
read into flow pieces with `read_split` (the exact Arrow batches of phase 1), pieces are
sorted as `flow_pass` sorts them, fed to a `FlowRunner`, and its table rows are converted to
Arrow as the pass's Parquet writer converts them (`arrow_rows.row_batch`). A value the writer
could not take (an integer past int64, a date out of range, a null in a non-null column) fails
here as it would there.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

import schemas
from pipeline.ingest import split_capture
from pipeline.session import ModelOptions
from pipeline.session.rows import TableRow
from pipeline.spark.arrow_rows import row_batch
from pipeline.spark.captures import read_split
from pipeline.spark.flows import STATE_KIND, FlowPassConfig, FlowRunner
from tests.support.flow_rows import SunkRows

CAPTURE_TABLE = "anomalies"
_UNMASKED = re.compile(r"(?i)passcode\s*[:=]\s*(?!\*\*\*)[^\s,;]")


@dataclass(slots=True)
class OfflineResult:
    packets: int = 0
    capture_anomalies: list[dict] = field(default_factory=list)  # as capture_anomaly_rows
    tables: dict[str, list[TableRow]] = field(default_factory=dict)
    carried: int = 0  # connections left open (state rows)


def _sort_key(row: dict) -> tuple:
    ts = row["ts_ns"]
    return (row["flow_key"], ts is not None, ts or 0, row["file_id"], row["record_offset"])


def run_offline(
    paths: Sequence[str],
    *,
    split_bytes: int = 64 * 1024 * 1024,
    close_open: bool = True,
    options: ModelOptions | None = None,
    batch_rows: int | None = None,
    convert: bool = True,
) -> OfflineResult:
    """``convert``: the table rows are converted to Arrow as the writer converts them (a caller
    that finds them equal to rows already converted may skip it)."""
    result = OfflineResult()
    piece_rows: list[dict] = []
    for file_id, path in enumerate(paths):
        for split in split_capture(path, split_bytes):
            for batch in read_split(file_id, split):
                for row in batch.to_pylist():
                    if row["record_type"] == "piece":
                        piece_rows.append(row)
                        result.packets += row["packet_count"]
                    elif row["record_type"] == "anomaly":
                        kind, _, detail = row["detail"].partition(": ")
                        result.capture_anomalies.append(
                            {
                                "kind": kind,
                                "file": path,
                                "file_offset": row["record_offset"],
                                "detail": detail,
                            }
                        )
    piece_rows.sort(key=_sort_key)
    config = FlowPassConfig(tuple(paths), options or ModelOptions(), close_open=close_open)
    held = SunkRows()
    runner = FlowRunner(config, held, batch_rows=batch_rows)
    tables: dict[str, list[TableRow]] = {name: [] for name in schemas.TABLES}
    if piece_rows:
        runner.feed_batch(pa.RecordBatch.from_pylist(piece_rows))
    runner.close()
    for kind, rows, _keys in held.items():
        if kind == STATE_KIND:
            result.carried += len(rows)
            continue
        if convert:
            _check_not_null(kind, row_batch(kind, rows))  # raises where the writer would
        tables[kind].extend(rows)
    result.tables = tables
    return result


def _check_not_null(table: str, batch: pa.RecordBatch) -> None:
    """Non-nullable columns of the table schema hold no nulls (the writer would refuse them)."""
    for spec in schemas.load(table).columns:
        if spec.nullable or spec.name in ("batch_id",):
            continue
        values = batch.column(spec.name)
        assert values.null_count == 0, f"{table}.{spec.name} has {values.null_count} nulls"


def assert_passcodes_masked(tables: Mapping[str, Iterable[TableRow]]) -> None:
    """Every header named passcode shows ``***``, and the text the pipeline composes (a frame's
    command, an anomaly's detail) never spells ``passcode:value``: broken framing can turn a
    header line into a command, which details then quote. Other header values are data."""
    composed = {"frames": "command", "anomalies": "detail"}
    for table, rows in tables.items():
        column = composed.get(table)
        for row in rows:
            if column is not None:
                text = row[column]
                assert not _UNMASKED.search(text), f"{table}.{column}: {text[:200]!r}"
            for name, value in row.get("header_list") or ():
                if name.lower() == "passcode":
                    assert value == "***", f"{table}: a passcode header shows its value"
