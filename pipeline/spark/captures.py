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
from operator import attrgetter
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


TCP_FIELDS = tuple(
    name
    for name in PACKET_SCHEMA.names
    if name not in ("record_type", "flow_key", "file_id", "detail")
)  # the columns a TcpPacket fills, in schema order
_TCP_VALUES = attrgetter(*TCP_FIELDS)


def flow_keys(
    src_ip: pa.Array, src_port: pa.Array, dst_ip: pa.Array, dst_port: pa.Array
) -> pa.Array:
    """`flow_key` for whole columns at once."""
    import pyarrow.compute as pc

    swap = pc.or_(  # (src_ip, src_port) > (dst_ip, dst_port), as Python compares the tuples
        pc.greater(src_ip, dst_ip),
        pc.and_(pc.equal(src_ip, dst_ip), pc.greater(src_port, dst_port)),
    )
    ip1, ip2 = pc.if_else(swap, dst_ip, src_ip), pc.if_else(swap, src_ip, dst_ip)
    port1 = pc.cast(pc.if_else(swap, dst_port, src_port), pa.string())
    port2 = pc.cast(pc.if_else(swap, src_port, dst_port), pa.string())
    return pc.binary_join_element_wise(ip1, port1, ip2, port2, "|")


def _packet_batch(file_id: int, packets: list[TcpPacket]) -> pa.RecordBatch:
    n = len(packets)
    values = zip(*map(_TCP_VALUES, packets), strict=True)  # one tuple per field
    columns = {
        name: pa.array(column, PACKET_SCHEMA.field(name).type)
        for name, column in zip(TCP_FIELDS, values, strict=True)
    }
    columns["file_id"] = pa.repeat(pa.scalar(file_id, pa.int32()), n)
    columns["record_type"] = pa.repeat(pa.scalar("packet"), n)
    columns["flow_key"] = flow_keys(
        columns["src_ip"], columns["src_port"], columns["dst_ip"], columns["dst_port"]
    )
    columns["detail"] = pa.nulls(n, pa.string())
    return pa.RecordBatch.from_pydict(columns, schema=PACKET_SCHEMA)


def _side_batch(file_id: int, rows: list[tuple[str, int | None, str]]) -> pa.RecordBatch:
    """Anomaly and stats rows: (record_type, record_offset, detail)."""
    n = len(rows)
    columns = {
        name: pa.nulls(n, field.type)
        for name, field in zip(PACKET_SCHEMA.names, PACKET_SCHEMA, strict=True)
    }
    columns["record_type"] = pa.array([r[0] for r in rows], pa.string())
    columns["file_id"] = pa.repeat(pa.scalar(file_id, pa.int32()), n)
    columns["record_offset"] = pa.array([r[1] for r in rows], pa.int64())
    columns["detail"] = pa.array([r[2] for r in rows], pa.string())
    return pa.RecordBatch.from_pydict(columns, schema=PACKET_SCHEMA)


def read_split(
    file_id: int, split: CaptureSplit, batch_rows: int = 65536
) -> Iterator[pa.RecordBatch]:
    reader = CaptureReader.from_split(split)
    packets: list[TcpPacket] = []
    side: list[tuple[str, int | None, str]] = []
    window = CaptureWindow()
    for item in reader:
        if type(item) is TcpPacket:
            packets.append(item)
            if len(packets) >= batch_rows:
                yield window.widened_by(_packet_batch(file_id, packets))
                packets = []
        elif isinstance(item, CaptureAnomaly):
            side.append(("anomaly", item.offset, f"{item.kind}: {item.detail}"))
    reader.close()
    if packets:
        yield window.widened_by(_packet_batch(file_id, packets))
    side.append(("stats", None, json.dumps({**asdict(reader.stats), **asdict(window)})))
    yield _side_batch(file_id, side)


@dataclass(slots=True)
class CaptureWindow:
    """Times of the first and last TCP packets read (by time, not by place in the file)."""

    first_ts_ns: int | None = None
    last_ts_ns: int | None = None

    def widened_by(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        import pyarrow.compute as pc

        extremes = pc.min_max(batch.column("ts_ns"))
        low, high = extremes["min"].as_py(), extremes["max"].as_py()
        if low is not None:
            self.first_ts_ns = low if self.first_ts_ns is None else min(self.first_ts_ns, low)
            self.last_ts_ns = high if self.last_ts_ns is None else max(self.last_ts_ns, high)
        return batch


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
