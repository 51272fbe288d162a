"""Table rows written as Parquet by the flow pass's own tasks, straight from Python.

Each task keeps one writer per (table, partition value) open and writes row groups as rows
accumulate, so a table's rows never cross into the JVM and a batch writes at most one file per
task, table and date. Files go to the table's staging folder of the batch (hive-style
``date=...`` folders, the partition column left out of the file, as Spark writes them); the
task reports each file it completed, and only reported files are placed and committed: files
of a failed or speculative task attempt stay in the staging folder, which is removed whole.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import schemas
from pipeline.lake.stats import FREE_TEXT_COLUMNS
from pipeline.session.rows import TableRow
from pipeline.spark.arrow_rows import HeldRows, held_rows

COMPRESSION = "zstd"
ROW_GROUP_ROWS = 20_000  # rows held per table before they are written as a row group
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
# A text column chunk's values (`dictionary_columns`) are dictionary-encoded until its dictionary
# reaches this size, then written plain. Under Arrow's 1 MB a row group's column of distinct
# values (ids, digests, offsets) kept a dictionary as large as its values, plus an index per row.
# 32 KB keeps one for the columns whose values repeat (commands, destinations, sessions): the
# flow pass's files are 15% smaller (116 MB of capture: 5.63 against 6.61 MB), their writing a
# little faster.
DICTIONARY_PAGE_BYTES = 32 << 10
DIGEST_SUFFIX = "_sha256"  # a column of hex digests (`column_encodings`)


@dataclass(frozen=True, slots=True)
class WrittenFile:
    table: str
    path: str  # relative to the table's staging folder, e.g. "date=2025-01-15/part-....parquet"
    rows: int


def file_schema(table: str) -> pa.Schema:
    """A table's columns as stored in its Parquet files: partition columns live in folders."""
    spec = schemas.load(table)
    return pa.schema([f for f in spec.arrow_schema() if f.name not in spec.partition_by])


def statistics_columns(stored: pa.Schema) -> list[str]:
    """The columns whose Parquet statistics are written: the top-level columns that are not
    nested, binary (bodies) or free text (`FREE_TEXT_COLUMNS`). Delta's file statistics take
    only those (`pipeline.lake.stats`), and no reader filters on a map's or a list's elements,
    a body or free text by them: the frames' two header columns' statistics were 8% of the flow
    pass's Parquet instructions (`benchmarks/bench_flow_instructions.py`). A body's or a free
    text's bounds would copy their values into the footer, out of the masking's reach."""
    return [
        f.name
        for f in stored
        if not pa.types.is_nested(f.type)
        and not pa.types.is_binary(f.type)
        and not pa.types.is_large_binary(f.type)
        and f.name not in FREE_TEXT_COLUMNS
    ]


@functools.cache
def dictionary_columns(table: str) -> list[str]:
    """The Parquet columns of a table that are dictionary-encoded: its top-level text columns.
    Numbers and times almost never repeat within a row group, and zstd takes what does: without
    a dictionary, a flow pass's tables (116 MB of capture) were written in 105 against 116 ms,
    in files of the same size. A nested column's text (a map's keys and values, a list's
    fields: the frames' headers, the messages' user headers) is written plain too: readers
    filter row groups by a dictionary only for a top-level column, and zstd makes the header
    columns as small without one: on small messages the flow pass's Parquet takes 6% fewer
    instructions (`bench_flow_instructions --shape small`: 21,403 against 22,887 a frame)."""
    sink = pa.BufferOutputStream()
    pq.write_table(file_schema(table).empty_table(), sink)
    columns = pq.ParquetFile(pa.BufferReader(sink.getvalue())).schema
    return [
        column.path
        for column in map(columns.column, range(len(columns)))
        if column.physical_type == "BYTE_ARRAY"
        and str(column.logical_type) == "String"
        and "." not in column.path
        and column.path not in column_encodings(table)
    ]


@functools.cache
def column_encodings(table: str) -> dict[str, str]:
    """The top-level columns written in an encoding other than plain, as Parquet's own delta
    encodings (every Parquet reader reads them; Spark's vectorized reader too).

    - 64-bit integers and times (`DELTA_BINARY_PACKED`): offsets, indexes and capture times
      grow row by row, and their differences take a few bits. Written in half the time of
      plain values that zstd then compresses (small messages: the frames table's ten such
      columns 6.4 against 13.5 ms for 42,300 rows), most of them smaller too (the frame
      index 0.8 against 40 KB, a capture time 60 against 80 KB), a few a little larger (a
      body's length 39 against 33 KB).
    - Digests (`DELTA_LENGTH_BYTE_ARRAY`): values of one length that never repeat but for
      equal bodies; their lengths take a few bytes a page, their text goes to zstd without a
      length between each two. A body's sha256: 3.8 against 6.4 ms and 895 against 949 KB.
    """
    encodings = {}
    for field in file_schema(table):
        if pa.types.is_int64(field.type) or pa.types.is_timestamp(field.type):
            encodings[field.name] = "DELTA_BINARY_PACKED"
        elif field.name.endswith(DIGEST_SUFFIX) and pa.types.is_string(field.type):
            encodings[field.name] = "DELTA_LENGTH_BYTE_ARRAY"
    return encodings


def partition_folder(names: tuple[str, ...], values: tuple[object, ...]) -> str:
    parts = []
    for name, value in zip(names, values, strict=True):
        text = HIVE_NULL if value is None else quote(str(value), safe="")
        parts.append(f"{quote(name, safe='')}={text}")
    return "/".join(parts)


class TableFileWriter:
    """Rows in, Parquet files out; `close()` returns what was written."""

    def __init__(
        self, table_dirs: dict[str, str], batch_id: str, *, write_behind: bool = False
    ) -> None:
        self.table_dirs = table_dirs
        self.batch_id = batch_id
        self._tag = uuid.uuid4().hex[:16]  # this task attempt's files
        self._held: dict[str, HeldRows] = {}
        self._writers: dict[tuple[str, tuple[object, ...]], tuple[pq.ParquetWriter, str]] = {}
        self._rows: dict[tuple[str, tuple[object, ...]], int] = {}
        # Row groups encoded and written on a thread of this process (`_background`)
        self.write_behind = write_behind
        self._writing: Future[None] | None = None  # the row group being encoded and written

    def add(self, table: str, rows: Iterable[TableRow]) -> None:
        """``rows`` are taken over: their container may be held as it is, until written."""
        held = self._held.get(table)
        if held is None:
            held = self._held[table] = held_rows(table, rows)
        else:
            held.extend(rows)
        if len(held) >= ROW_GROUP_ROWS:
            self._write(table, held)
            del self._held[table]

    def close(self) -> list[WrittenFile]:
        for table, held in self._held.items():
            if held:
                self._write(table, held)
        self._held.clear()
        self._written()
        written = []
        for key, (writer, path) in self._writers.items():
            writer.close()
            written.append(WrittenFile(key[0], path, self._rows[key]))
        self._writers.clear()
        return written

    def _write(self, table: str, rows: HeldRows) -> None:
        spec = schemas.load(table)
        batch = rows.batch()
        groups = _partitions(batch, spec.partition_by)
        stored = file_schema(table)
        for values, indices in groups:
            part = batch.take(indices) if len(groups) > 1 else batch
            columns = [
                pa.repeat(pa.scalar(self.batch_id, f.type), part.num_rows)
                if f.name == "batch_id"
                else part.column(f.name)
                for f in stored
            ]
            writer = self._writer(table, values, stored)
            group = pa.Table.from_arrays(columns, schema=stored)
            if self.write_behind:
                self._written()
                self._writing = _background().submit(writer.write_table, group)
            else:
                writer.write_table(group)
            key = (table, values)
            self._rows[key] = self._rows.get(key, 0) + part.num_rows

    def _written(self) -> None:
        """Waits for the row group being written (its error, if any, raised here)."""
        if self._writing is not None:
            writing, self._writing = self._writing, None
            writing.result()

    def _writer(
        self, table: str, values: tuple[object, ...], stored: pa.Schema
    ) -> pq.ParquetWriter:
        key = (table, values)
        found = self._writers.get(key)
        if found is not None:
            return found[0]
        folder = partition_folder(schemas.load(table).partition_by, values)
        relative = f"{folder}/part-{self._tag}-{len(self._writers):05d}.{COMPRESSION}.parquet"
        target = Path(self.table_dirs[table]) / relative
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o750)
        writer = pq.ParquetWriter(
            str(target),
            stored,
            compression=COMPRESSION,
            dictionary_pagesize_limit=DICTIONARY_PAGE_BYTES,
            use_dictionary=dictionary_columns(table),
            column_encoding=column_encodings(table),
            write_statistics=statistics_columns(stored),
        )
        self._writers[key] = (writer, relative)
        return writer


_BACKGROUND: tuple[int, ThreadPoolExecutor] | None = None


def _background() -> ThreadPoolExecutor:
    """This process's thread that encodes, compresses and writes row groups for a writer that
    writes behind. Arrow does that without the GIL, so the task's Python goes on making the next
    rows meanwhile: where a task has a core to spare (a pass of one long connection), the flow
    pass on 100 MB in one process went from 1.34-1.39 to 1.22-1.28 s. With every core busy it
    gains nothing and cost memory (2.26 GB in bench_run: peak PSS 1.44 -> 1.53-1.56 GB, the
    allocator keeping what one thread frees for another): the runner asks for it only when the
    heaviest flow outweighs a task's share (`pipeline.spark.placement.outweighs_a_task`). One
    row group at a time is in its hands (`TableFileWriter._written`). Made anew in a forked
    child (Spark's workers)."""
    global _BACKGROUND
    if _BACKGROUND is None or _BACKGROUND[0] != os.getpid():
        _BACKGROUND = (os.getpid(), ThreadPoolExecutor(1, thread_name_prefix="table-files"))
    return _BACKGROUND[1]


def _row_numbers(count: int) -> pa.Array:
    """0 .. count - 1 as int32, made by numpy: Arrow converted a range value by value (135 ns
    each, a frame's rows numbered once a table)."""
    return pa.array(np.arange(count, dtype=np.int32))


def _partitions(
    batch: pa.RecordBatch, partition_by: tuple[str, ...]
) -> list[tuple[tuple[object, ...], pa.Array]]:
    """The batch's partition values, each with the indices of its rows (grouped in Arrow, not
    row by row in Python)."""
    names = list(partition_by)
    if not names:
        return [((), _row_numbers(batch.num_rows))]
    indexed = pa.table(
        [*(batch.column(name) for name in names), _row_numbers(batch.num_rows)],
        names=[*names, "_row"],
    )
    grouped = indexed.group_by(names, use_threads=False).aggregate([("_row", "list")])
    values = zip(*(grouped.column(name).to_pylist() for name in names), strict=True)
    rows = grouped.column("_row_list").chunks
    indices = [row.values for chunk in rows for row in chunk]
    return list(zip(values, indices, strict=True))


def write_table_rows(
    table: str, rows: Iterable[TableRow], folder: str, batch_id: str
) -> list[WrittenFile]:
    """Rows made outside the flow pass (on the driver), written as its tasks write theirs."""
    writer = TableFileWriter({table: folder}, batch_id)
    writer.add(table, rows)
    return writer.close()
