"""Phase 1 of a run: capture files -> one row per (flow, capture split), in parallel.

Each row packs one flow's packets of one split (`pipeline.spark.pieces`); payload bytes are
not carried: a packet holds where its payload lies in its file, and the flow pass reads it back
by offset. Anomaly and stats rows of each split travel in the same frame.
"""

from __future__ import annotations

import json
import pickle
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from pipeline.spark.task_counters import TaskCounters

from pipeline.ingest import (
    CaptureAnomaly,
    CaptureReader,
    CaptureSplit,
    CaptureStats,
    TcpPacket,
    split_capture,
)
from pipeline.ingest.scan import new_scanner
from pipeline.spark.pieces import Piece, PieceBuilder, flow_key, pack, unpack
from pipeline.spark.placement import heaviest

__all__ = [
    "PIECE_SCHEMA",
    "flow_key",
    "packets_by_flow",
    "packets_frame",
    "plan_tasks",
    "read_paths",
    "read_split",
]

PIECE_SCHEMA = pa.schema(
    [
        ("record_type", pa.string()),  # "piece" | "anomaly" | "stats" | "tls_client_random"
        ("flow_key", pa.string()),
        ("file_id", pa.int32()),
        ("ts_ns", pa.int64()),  # a piece's first packet (see Piece.first)
        ("record_offset", pa.int64()),  # ... and its record; an anomaly's offset
        ("packet_count", pa.int32()),
        ("packets", pa.binary()),  # PACKET_DTYPE records, compressed (`pieces.pack`)
        ("detail", pa.string()),  # anomaly kind and detail, or stats as JSON (with the
        # split's heaviest flows: `pipeline.spark.placement`)
    ]
)

# A capture task's share of a file. Each task costs Spark about 0.1 s besides its reading (its
# Arrow batches handed to the JVM and cached); against 64 MB, 128 MB splits (as HDFS blocks)
# took stomp-lake run on 0.58 / 2.26 GB from 12.2 / 24.0 to 11.6 / 23.6 s, its memory unchanged
# (a task's pieces are sent every PIECE_PACKETS whatever its split's size).
DEFAULT_SPLIT_BYTES = 128 * 1024 * 1024
# Capture tasks per core of the session (`packets_frame`): a task reads several splits in turn
# when there are more. Every task costs Spark and its Python worker a fixed 0.04-0.06 s (the
# task sent, its function unpickled, its output closed and cached), and the stage after it
# reads the cache in as many tasks again; two a core still let a core that finishes early take
# the last one (2.26 GB, 4 alternated pairs: the capture pass ended 0.23 s sooner than with a
# task a split). What the JVM holds of a task's output (the next stage's task sorts a cached
# partition for the shuffle) grows with the splits the task read: peak PSS 1.20-1.22 against
# 1.17-1.20 GB, and with one 4.69 GB connection in 4 tasks 1.45 against 1.37 GB. So a task
# reads at most MAX_TASK_SPLITS splits: bounded by the split size, not by the input.
TASKS_PER_CORE = 2
MAX_TASK_SPLITS = 5
# Packets held before a split's pieces are packed and sent: bounds the reader's memory and the
# size of one Arrow batch (48 bytes a packet, about 16 once packed) whatever the traffic's shape.
PIECE_PACKETS = 131_072


@dataclass(slots=True, frozen=True)
class CaptureTask:
    file_id: int
    split: bytes  # a pickled CaptureSplit: where to start and the context to decode from there


def plan_tasks(paths: Sequence[str], split_bytes: int = DEFAULT_SPLIT_BYTES) -> list[CaptureTask]:
    tasks = []
    for file_id, path in enumerate(paths):
        for split in split_capture(path, split_bytes):
            tasks.append(CaptureTask(file_id, pickle.dumps(split)))
    return tasks


def _piece_batch(pieces: list[Piece]) -> pa.RecordBatch:
    firsts = [piece.first for piece in pieces]
    n = len(pieces)
    return pa.RecordBatch.from_pydict(
        {
            "record_type": pa.repeat(pa.scalar("piece"), n),
            "flow_key": [piece.key for piece in pieces],
            "file_id": [piece.file_id for piece in pieces],
            "ts_ns": [first[0] for first in firsts],
            "record_offset": [first[2] for first in firsts],
            "packet_count": [len(piece.packets) for piece in pieces],
            "packets": [pack(piece.packets) for piece in pieces],
            "detail": pa.nulls(n, pa.string()),
        },
        schema=PIECE_SCHEMA,
    )


def _side_batch(file_id: int, rows: list[tuple[str, int | None, str]]) -> pa.RecordBatch:
    """Anomaly and stats rows: (record_type, record_offset, detail)."""
    n = len(rows)
    columns = {
        name: pa.nulls(n, field.type)
        for name, field in zip(PIECE_SCHEMA.names, PIECE_SCHEMA, strict=True)
    }
    columns["record_type"] = pa.array([r[0] for r in rows], pa.string())
    columns["file_id"] = pa.repeat(pa.scalar(file_id, pa.int32()), n)
    columns["record_offset"] = pa.array([r[1] for r in rows], pa.int64())
    columns["detail"] = pa.array([r[2] for r in rows], pa.string())
    return pa.RecordBatch.from_pydict(columns, schema=PIECE_SCHEMA)


def read_split(
    file_id: int,
    split: CaptureSplit,
    piece_packets: int = PIECE_PACKETS,
    counters: TaskCounters | None = None,
    *,
    compiled: bool = True,
    tls_randoms: bool = False,
) -> Iterator[pa.RecordBatch]:
    """Piece, anomaly and stats rows of one split. ``compiled``: read plain TCP packets with
    the compiled scanner when it is built (`pipeline.ingest.scan`); False reads every packet
    in Python, the reference the two are tested against. ``tls_randoms``: a row for each
    ClientHello's random too (`client_randoms`: which secrets of the key logs the run needs)."""
    scanner = new_scanner() if compiled else None
    reader = CaptureReader.from_split(split, scanner)
    builder = PieceBuilder(file_id)
    held = 0
    side: list[tuple[str, int | None, str]] = []
    window = CaptureWindow()
    flow_packets: Counter[str] = Counter()  # for the flow pass's placement
    randoms = ClientRandoms(reader) if tls_randoms else None
    for item in reader.scan():
        if isinstance(item, CaptureAnomaly):
            side.append(("anomaly", item.offset, f"{item.kind}: {item.detail}"))
            continue
        if type(item) is TcpPacket:
            builder.add(item)
            held += 1
        else:  # the scanner, holding packets
            held += item.count
            builder.add_scanned(item)
            item.clear()
        if held >= piece_packets:
            yield window.widened_by(_counted(builder.pieces(), flow_packets, randoms))
            held = 0
    if held:
        yield window.widened_by(_counted(builder.pieces(), flow_packets, randoms))
    if randoms is not None:
        side += randoms.close()
    reader.close()
    stats = {**_fields(reader.stats), **_fields(window), "flows": heaviest(flow_packets)}
    side.append(("stats", None, json.dumps(stats)))
    yield _side_batch(file_id, side)
    if counters is not None:
        counters.split_read(file_id, split.end - split.start, reader.stats.packets)


def _fields(record: CaptureStats | CaptureWindow) -> dict[str, object]:
    """A record's fields, its values as they are (they are serialized at once): a split's stats
    row is made without `dataclasses.asdict`'s deep copies, which took 4% of the time of the
    capture reader's fuzz target, whose splits are a few kilobytes."""
    return {field.name: getattr(record, field.name) for field in fields(record)}


def _counted(
    pieces: Iterable[Piece], flow_packets: Counter[str], randoms: ClientRandoms | None = None
) -> list[Piece]:
    listed = list(pieces)
    for piece in listed:
        flow_packets[piece.key] += len(piece.packets)
        if randoms is not None:
            randoms.add(piece)
    return listed


class ClientRandoms:
    """The random of each TLS ClientHello a split holds, found by looking at the first bytes
    of each packet's payload in the mapped file (a handshake record whose first message is a
    ClientHello, its random at bytes 11-43), for all of a piece's packets at once."""

    __slots__ = ("_bytes", "_buf", "rows")

    def __init__(self, reader: CaptureReader) -> None:
        self._buf = reader.mapped()
        self._bytes = np.frombuffer(self._buf, dtype=np.uint8) if len(self._buf) else None
        self.rows: list[tuple[str, int | None, str]] = []

    def add(self, piece: Piece) -> None:
        data = self._bytes
        if data is None:
            return
        packets = piece.packets
        candidates = packets[packets["payload_len"] >= 43]
        if not len(candidates):
            return
        start = candidates["payload_offset"]
        hello = (data[start] == 0x16) & (data[start + 1] == 3) & (data[start + 5] == 1)
        for offset, record in zip(
            start[hello].tolist(), candidates["record_offset"][hello].tolist(), strict=True
        ):
            random = bytes(self._buf[offset + 11 : offset + 43])
            self.rows.append(("tls_client_random", record, random.hex()))

    def close(self) -> list[tuple[str, int | None, str]]:
        """The rows found; the view of the file let go (a mapping cannot close while viewed)."""
        self._bytes = None
        return self.rows


def read_paths(
    paths: Sequence[str],
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    *,
    compiled: bool = True,
    tls_randoms: bool = False,
) -> Iterator[pa.RecordBatch]:
    """Every split of the files in turn, in this process: the capture pass without Spark
    (benchmarks, and the tests that hold the compiled reading to the pure one)."""
    for task in plan_tasks(paths, split_bytes):
        split = pickle.loads(task.split)
        yield from read_split(task.file_id, split, compiled=compiled, tls_randoms=tls_randoms)


def packets_by_flow(
    batches: Iterable[pa.RecordBatch],
) -> tuple[dict[tuple[int, str], bytes], list[tuple[str, int, int | None, str]]]:
    """What a capture pass read, whatever its pieces' boundaries: each (file, flow)'s packet
    records in the order read, and the anomaly and stats rows."""
    flows: dict[tuple[int, str], list[bytes]] = {}
    side = []
    for batch in batches:
        for row in batch.to_pylist():
            if row["record_type"] == "piece":
                records = unpack(row["packets"], row["packet_count"]).tobytes()
                flows.setdefault((row["file_id"], row["flow_key"]), []).append(records)
            else:
                side.append(
                    (row["record_type"], row["file_id"], row["record_offset"], row["detail"])
                )
    return {key: b"".join(blobs) for key, blobs in flows.items()}, side


@dataclass(slots=True)
class CaptureWindow:
    """Times of the first and last TCP packets read (by time, not by place in the file)."""

    first_ts_ns: int | None = None
    last_ts_ns: int | None = None

    def widened_by(self, pieces: list[Piece]) -> pa.RecordBatch:
        for piece in pieces:
            times = piece.packets["ts_ns"]
            low, high = int(np.min(times)), int(np.max(times))
            self.first_ts_ns = low if self.first_ts_ns is None else min(self.first_ts_ns, low)
            self.last_ts_ns = high if self.last_ts_ns is None else max(self.last_ts_ns, high)
        return _piece_batch(pieces)


def packets_frame(
    spark: SparkSession,
    paths: Sequence[str],
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    counters: TaskCounters | None = None,
    *,
    tls_randoms: bool = False,
) -> DataFrame:
    """One row per flow and split (plus anomaly and stats rows, and with ``tls_randoms`` the
    ClientHellos' randoms) of the given capture files; `counters` (progress) are added to as
    each split is read."""
    from pyspark.sql.pandas.types import from_arrow_schema

    tasks = plan_tasks(paths, split_bytes)
    # Splits by partition, without a shuffle: the partitions of a range hold the numbers of
    # their groups of splits (`split_groups`), and the splits travel with the function. A range
    # is made in the JVM, where rows made in Python (`createDataFrame` of an RDD) cost every
    # task a Python hop of its own: the pass on 2.26 GB, warm, 3.3-3.5 s against 4.1-4.4 s.
    splits = [(task.file_id, task.split) for task in tasks]
    cores = spark.sparkContext.defaultParallelism
    groups = split_groups(len(tasks), capture_tasks(len(tasks), cores))

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for number in batch.column(0).to_pylist():
                for file_id, split in (splits[i] for i in groups[number]):
                    yield from read_split(
                        file_id, pickle.loads(split), counters=counters, tls_randoms=tls_randoms
                    )

    numbers = spark.range(0, len(groups), 1, len(groups) or 1)
    return numbers.mapInArrow(read, from_arrow_schema(PIECE_SCHEMA))


def capture_tasks(splits: int, cores: int) -> int:
    """Tasks of the capture pass: two a core (`TASKS_PER_CORE`), more where a task would read
    more than `MAX_TASK_SPLITS` splits, in whole waves of ``cores``; at most one a split."""
    cores = max(cores, 1)
    tasks = max(TASKS_PER_CORE * cores, -(-splits // MAX_TASK_SPLITS))
    return min(-(-tasks // cores) * cores, splits)


def split_groups(count: int, most: int) -> list[range]:
    """Splits ``0 .. count - 1`` in order, in at most ``most`` groups whose sizes differ by one
    at most: a task's splits, which it reads in turn (neighbours, so most are of one file)."""
    groups = max(1, min(count, most))
    size, extra = divmod(count, groups)
    bounds = [i * size + min(i, extra) for i in range(groups + 1)]
    return [range(bounds[i], bounds[i + 1]) for i in range(groups)] if count else []
