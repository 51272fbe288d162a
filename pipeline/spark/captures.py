"""Phase 1 of a run: capture files -> one row per TCP packet, in parallel.

Payload bytes are not carried: a row holds where the payload lies in its file, and the per-flow
pass reads it back by offset. The shuffle that groups packets by flow then moves ~80 bytes a
packet instead of the payload.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

from pipeline.ingest import CaptureAnomaly, CaptureReader, CaptureSplit, TcpPacket, split_capture

PACKET_SCHEMA = pa.schema(
    [
        ("record_type", pa.string()),  # "packet" | "anomaly" | "stats"
        ("flow_key", pa.string()),
        ("file_id", pa.int32()),
        ("src_ip", pa.string()),
        ("src_port", pa.int32()),
        ("dst_ip", pa.string()),
        ("dst_port", pa.int32()),
        ("ts_ns", pa.int64()),
        ("seq", pa.int64()),
        ("ack", pa.int64()),
        ("flags", pa.int32()),
        ("window", pa.int32()),
        ("payload_offset", pa.int64()),
        ("payload_len", pa.int32()),
        ("wire_len", pa.int32()),
        ("record_offset", pa.int64()),
        ("detail", pa.string()),  # anomaly kind and detail, or stats as JSON
    ]
)

SPLIT_SCHEMA = pa.schema([("file_id", pa.int32()), ("split", pa.binary())])

DEFAULT_SPLIT_BYTES = 64 * 1024 * 1024


def flow_key(src_ip: str, src_port: int, dst_ip: str, dst_port: int) -> str:
    """The same key for both directions of a 4-tuple."""
    a, b = (src_ip, src_port), (dst_ip, dst_port)
    (ip1, p1), (ip2, p2) = (a, b) if a <= b else (b, a)
    return f"{ip1}|{p1}|{ip2}|{p2}"


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


def _packet_columns() -> dict[str, list]:
    return {name: [] for name in PACKET_SCHEMA.names}


def read_split(
    file_id: int, split: CaptureSplit, batch_rows: int = 65536
) -> Iterator[pa.RecordBatch]:
    cols = _packet_columns()
    reader = CaptureReader.from_split(split)
    appenders = [cols[name].append for name in PACKET_SCHEMA.names]
    count = 0
    for item in reader:
        if isinstance(item, TcpPacket):
            row = (
                "packet",
                flow_key(item.src_ip, item.src_port, item.dst_ip, item.dst_port),
                file_id,
                item.src_ip,
                item.src_port,
                item.dst_ip,
                item.dst_port,
                item.ts_ns,
                item.seq,
                item.ack,
                item.flags,
                item.window,
                item.payload_offset,
                item.payload_len,
                item.wire_len,
                item.record_offset,
                None,
            )
        elif isinstance(item, CaptureAnomaly):
            row = (
                "anomaly",
                None,
                file_id,
                *([None] * 12),
                item.offset,
                f"{item.kind}: {item.detail}",
            )
        else:
            continue
        for append, value in zip(appenders, row, strict=True):
            append(value)
        count += 1
        if count >= batch_rows:
            yield pa.RecordBatch.from_pydict(cols, schema=PACKET_SCHEMA)
            cols = _packet_columns()
            appenders = [cols[name].append for name in PACKET_SCHEMA.names]
            count = 0
    reader.close()
    stats = json.dumps(asdict(reader.stats))
    for name in PACKET_SCHEMA.names:
        cols[name].append(None)
    cols["record_type"][-1] = "stats"
    cols["file_id"][-1] = file_id
    cols["detail"][-1] = stats
    yield pa.RecordBatch.from_pydict(cols, schema=PACKET_SCHEMA)


def packets_frame(
    spark: SparkSession, paths: Sequence[str], split_bytes: int = DEFAULT_SPLIT_BYTES
) -> DataFrame:
    """One row per TCP packet (plus anomaly and stats rows) of the given capture files."""
    from pyspark.sql.pandas.types import from_arrow_schema

    tasks = plan_tasks(paths, split_bytes)
    plan = spark.createDataFrame([(t.file_id, t.split) for t in tasks], "file_id int, split binary")
    plan = plan.repartition(max(1, len(tasks)))

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for file_id, split in zip(
                batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True
            ):
                yield from read_split(file_id, pickle.loads(split))

    return plan.mapInArrow(read, from_arrow_schema(PACKET_SCHEMA))
