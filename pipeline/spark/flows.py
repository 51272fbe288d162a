"""Phase 2 of a run: packets grouped by flow, sorted by time, streamed through the flow runner.

The pass is a single `mapInArrow` over partitions sorted by (flow_key, ts_ns): one flow's packets
arrive together and in order, so memory holds one connection's reassembly and decoder state, never
the connection's bytes. Its output is one row per produced table row, tagged with the table name
and carried in that table's struct column; `split_tables` turns it into one DataFrame per table.
State of connections still open travels in the same stream, tagged `_state`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

import schemas
from pipeline.flows import FlowRunner, RunnerConfig

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

STATE_KIND = "_state"
COUNTERS_KIND = "_counters"
WRITER_COLUMNS = ("date", "batch_id")  # added on the Spark side
OUTPUT_BATCH_ROWS = 20_000


def row_struct(table: str) -> pa.StructType:
    arrow = schemas.load(table).arrow_schema()
    return pa.struct([f for f in arrow if f.name not in ("batch_id",)])


def output_schema() -> pa.Schema:
    fields = [pa.field("kind", pa.string()), pa.field("flow_key", pa.string())]
    fields += [pa.field(table, row_struct(table)) for table in schemas.TABLES]
    fields += [pa.field("state", pa.binary()), pa.field("counters", pa.string())]
    # on a state row: the session still open, whose rows may precede its `sessions` row
    fields += [pa.field("open_session_id", pa.string())]
    return pa.schema(fields)


def _to_batch(
    schema: pa.Schema, kind: str, rows: list[dict], flow_keys: list[str | None]
) -> pa.RecordBatch:
    n = len(rows)
    arrays = []
    for field in schema:
        if field.name == "kind":
            arrays.append(pa.array([kind] * n, pa.string()))
        elif field.name == "flow_key":
            arrays.append(pa.array(flow_keys, pa.string()))
        elif field.name == kind:
            arrays.append(pa.array(rows, field.type))
        elif field.name == "state" and kind == STATE_KIND:
            arrays.append(pa.array([r["state"] for r in rows], pa.binary()))
        elif field.name == "open_session_id" and kind == STATE_KIND:
            arrays.append(pa.array([r["session_id"] for r in rows], pa.string()))
        elif field.name == "counters" and kind == COUNTERS_KIND:
            arrays.append(pa.array([r["counters"] for r in rows], pa.string()))
        else:
            arrays.append(pa.nulls(n, field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def run_partition(
    batches: Iterable[pa.RecordBatch], config: RunnerConfig
) -> Iterator[pa.RecordBatch]:
    schema = output_schema()
    runner = FlowRunner(config)

    def flush() -> Iterator[pa.RecordBatch]:
        for kind, rows, keys in runner.drain():
            if rows:
                yield _to_batch(schema, kind, rows, keys)

    for batch in batches:
        runner.feed_columns(batch.to_pydict())
        if runner.pending_rows() >= OUTPUT_BATCH_ROWS:
            yield from flush()
    runner.close()
    yield from flush()


def flow_pass(
    packets: DataFrame, state: DataFrame | None, config: RunnerConfig, partitions: int
) -> DataFrame:
    """packets (+ carried state rows) -> tagged table rows; see the module docstring."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    stream = packets.where(F.col("record_type") == "packet").drop("detail")
    if state is not None:
        stream = stream.unionByName(state, allowMissingColumns=True)
    # A 64-bit hash first: flow keys share long prefixes ("10.0.0.1|..."), which defeats the
    # sort's 8-byte key prefixes; the key itself still splits the (rare) hash collisions.
    stream = (
        stream.withColumn("flow_hash", F.xxhash64("flow_key"))
        .repartition(partitions, "flow_hash")
        .sortWithinPartitions(
            "flow_hash", "flow_key", F.col("ts_ns").asc_nulls_first(), "file_id", "record_offset"
        )
        .drop("flow_hash")
    )
    return stream.mapInArrow(
        lambda it: run_partition(it, config), from_arrow_schema(output_schema())
    )


def split_tables(
    tagged: DataFrame, batch_id: str, tables: Sequence[str] = schemas.TABLES
) -> dict[str, DataFrame]:
    from pyspark.sql import functions as F

    out = {}
    for table in tables:
        names = schemas.load(table).column_names
        df = (
            tagged.where(F.col("kind") == table)
            .select(f"{table}.*")
            .withColumn("batch_id", F.lit(batch_id))
        )
        out[table] = df.select(*names)
    return out
