"""Phase 2 of a run: flow pieces grouped by flow, merged into packet order, each flow's packets
driven through its connection driver (`pipeline.driver`).

The pass is a single `mapInArrow` over partitions sorted by (flow, first packet of the piece):
one flow's pieces arrive together and in order, so memory holds the pieces of one flow that
overlap in time and one connection's reassembly and decoder state, never the connection's bytes.
Each task writes the table rows it makes as Parquet itself, into the batch's staging folders
(`table_files`: rows never cross into the JVM), and outputs only a row per file it wrote
(`_file`), one of counters (`_counters`) and those of each connection still open (`_state`,
its carried state: `pipeline.spark.carried_state`, a row per chunk in ``record_offset`` order).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from dataclasses import field as default
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

import schemas
from pipeline.driver import ConnectionDriver, DriverConfig
from pipeline.net import DEFAULT_BROKER_PORTS
from pipeline.process import fewer_collections, give_back_memory
from pipeline.session import ModelOptions
from pipeline.session.frame_rows import FrameRows, TableRows
from pipeline.session.rows import TableRow
from pipeline.spark.carried_state import CHUNK_BYTES, StateReader, dump_state
from pipeline.spark.packet_loop import packet_loop
from pipeline.spark.payloads import PayloadFiles
from pipeline.spark.pieces import Piece, PieceMerger, key_ends, unpack_column
from pipeline.spark.table_files import TableFileWriter, WrittenFile
from pipeline.tls.keylog import KeyLog, use_keylog
from pipeline.websocket.handshake import MAX_HEAD

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from pipeline.spark.task_counters import TaskCounters

STATE_KIND = "_state"
FILE_KIND = "_file"
COUNTERS_KIND = "_counters"
OUTPUT_BATCH_ROWS = 20_000  # table rows held by a task before they go to its writer
COLLECT_PACKETS = 8_192  # packets fed before the rows they made are collected
RUN_PACKETS = 64  # in-order data packets passed on together at most (see `packet_loop`)


@dataclass(frozen=True, slots=True)
class FlowPassConfig:
    paths: tuple[str, ...]  # capture files of this run, indexed by file_id
    options: ModelOptions = default(default_factory=ModelOptions)
    broker_ports: tuple[int, ...] = DEFAULT_BROKER_PORTS
    close_open: bool = False
    # (table, staging folder) pairs, one for every table: the flow pass writes table rows there
    # as Parquet itself. Required by the pass; a `FlowRunner` alone does not use them.
    table_dirs: tuple[tuple[str, str], ...] = ()
    batch_id: str = ""
    write_behind: bool = False  # row groups written on a thread (`table_files._background`)
    # bytes an undecided WebSocket upgrade holds per direction (`pipeline.websocket.transport`)
    websocket_max_held: int = MAX_HEAD
    # the secrets of the run's key logs for the TLS connections of its captures, looked up by
    # the tasks' connections (`pipeline.tls.keylog.use_keylog`)
    tls_keys: KeyLog | None = None

    @property
    def driver(self) -> DriverConfig:
        return DriverConfig(
            self.options, self.broker_ports, self.close_open, self.websocket_max_held
        )

    def table_folders(self) -> dict[str, str]:
        """Every table's staging folder; raises when one is missing (the pass needs them)."""
        folders = dict(self.table_dirs)
        missing = [table for table in schemas.TABLES if table not in folders]
        if missing:
            raise ValueError(f"the flow pass needs a staging folder for {', '.join(missing)}")
        return folders


# Where a `FlowRunner` hands its rows: (table or `STATE_KIND`, rows, their flow keys)
RowSink = Callable[[str, TableRows, list[str | None]], None]


class FlowRunner:
    """Feed piece rows (and carried state rows) sorted by flow; the table rows and the state of
    connections still open go to ``sink`` by table (or `STATE_KIND`), with their flow keys.

    Rows are collected every `COLLECT_PACKETS` packets and handed over whenever
    ``batch_rows`` (`OUTPUT_BATCH_ROWS`) table rows are held, at `flush` and at `close`: memory
    holds that many rows whatever one input batch or piece makes (a 16 MB batch of pieces,
    350,000 packets, can make 100,000s), or a connection that ends with a million MESSAGEs
    unsettled."""

    def __init__(
        self, config: FlowPassConfig, sink: RowSink, *, batch_rows: int | None = None
    ) -> None:
        self.config = config
        self._sink = sink
        self._batch_rows = OUTPUT_BATCH_ROWS if batch_rows is None else batch_rows
        self._driver_config = config.driver
        use_keylog(config.tls_keys)  # this process's connections look their secrets up there
        self.files = PayloadFiles(config.paths)
        self._feed_packets = packet_loop()
        self._key: str | None = None
        self._driver: ConnectionDriver | None = None
        self._carried: StateReader | None = None  # state rows of the flow, before its pieces
        self._merger = PieceMerger()
        self._ends: tuple[str, int, str, int] = ("", 0, "", 0)
        self._out: dict[str, TableRows] = {}
        self._out_keys: dict[str, list[str | None]] = {}
        self._pending = 0
        self.flows = 0

    # -- input -------------------------------------------------------------------------------
    def feed_batch(self, batch: pa.RecordBatch) -> None:
        """A batch of the sorted stream: columns record_type, flow_key, file_id, packet_count,
        packets, state."""
        names = batch.schema.names
        nulls = [None] * batch.num_rows
        columns = [
            batch.column(name).to_pylist() if name in names else nulls
            for name in ("record_type", "flow_key", "file_id", "state")
        ]
        packets = (
            unpack_column(batch.column("packets"), batch.column("packet_count"))
            if "packets" in names
            else nulls
        )
        for record_type, key, file_id, state, piece in zip(*columns, packets, strict=True):
            if key != self._key:
                self._end_flow()
                self._start_flow(key)
            if record_type == "state":
                self.resume(key, state)
            else:
                self.feed_piece(Piece(key, file_id, piece))

    def resume(self, key: str, state: bytes) -> None:
        """A connection carried from an earlier batch, before the flow's pieces: its state rows'
        bytes (`CarriedChunks.chunks`), a row at a time in order."""
        if key != self._key:
            self._end_flow()
            self._start_flow(key)
        if self._carried is None:
            self._carried = StateReader()
        self._carried.add(state)

    def feed_piece(self, piece: Piece) -> None:
        """One piece of the current flow (pieces in order of `Piece.first`)."""
        if piece.key != self._key:
            self._end_flow()
            self._start_flow(piece.key)
        self._resume_carried()
        self._feed(self._merger.add(piece))

    def close(self) -> None:
        self._end_flow()
        self.flush()
        self.files.close()

    # -- output ------------------------------------------------------------------------------
    def flush(self) -> None:
        """Hands every row held to the sink."""
        out, keys = self._out, self._out_keys
        self._out, self._out_keys, self._pending = {}, {}, 0
        for kind, rows in out.items():
            self._sink(kind, rows, keys[kind])

    def _collect(self, driver: ConnectionDriver) -> None:
        # the rows of MESSAGEs a connection left unsettled come a batch at a time: a million of
        # them, read back from disk (`pipeline.session.spilled`), are never in memory at once
        for kind, rows in driver.drain(self._batch_rows).items():  # containers taken over
            held = self._out.get(kind)
            if held is None:
                self._out[kind] = rows
            else:
                held.extend(rows)
            self._out_keys.setdefault(kind, []).extend([self._key] * len(rows))
            self._pending += len(rows)
        if self._pending >= self._batch_rows:
            self.flush()

    # -- one flow ----------------------------------------------------------------------------
    def _start_flow(self, key: str) -> None:
        self._key = key
        self.flows += 1
        self._ends = key_ends(key)
        self._driver = None
        self._carried = None

    def _resume_carried(self) -> None:
        """The carried state's rows have all come: the connection goes on from it."""
        if self._carried is not None:
            reader, self._carried = self._carried, None
            self._driver = ConnectionDriver(self._driver_config, reader.load())

    def _feed(self, packets: np.ndarray) -> None:
        for start in range(0, len(packets), COLLECT_PACKETS):
            self._feed_some(packets[start : start + COLLECT_PACKETS])

    def _feed_some(self, packets: np.ndarray) -> None:
        """Packets of the current flow, in order, through the packet loop (`packet_loop`);
        then the rows they made are collected."""
        driver = self._driver
        if driver is None:
            driver = self._driver = ConnectionDriver(self._driver_config)
        self._feed_packets(packets, driver, self._ends, self.files, RUN_PACKETS)
        self._collect(driver)

    def _end_flow(self) -> None:
        if self._key is None:
            return
        self._resume_carried()
        self._feed(self._merger.finish())
        driver = self._driver
        self._driver = None
        if driver is None:
            return
        session_id = driver.open_session_id
        state = driver.end()
        self._collect(driver)
        while driver.rows_left:
            self._collect(driver)
        if state is not None:
            self._out.setdefault(STATE_KIND, []).append(
                {"state": dump_state(state), "session_id": session_id}
            )
            self._out_keys.setdefault(STATE_KIND, []).append(self._key)


def output_schema() -> pa.Schema:
    fields = [pa.field("kind", pa.string()), pa.field("flow_key", pa.string())]
    # on a state row: a chunk of the state of a connection still open, its number among them,
    # and on the first, its session, whose rows may precede its `sessions` row
    fields += [pa.field("state", pa.binary()), pa.field("record_offset", pa.int64())]
    fields += [pa.field("open_session_id", pa.string())]
    # on a file row: a Parquet file the pass wrote (table, path in its staging folder, rows);
    # on a counters row: what the task saw go into the tables, as JSON
    fields += [pa.field("table", pa.string()), pa.field("path", pa.string())]
    fields += [pa.field("rows", pa.int64()), pa.field("counters", pa.string())]
    return pa.schema(fields)


def run_partition(
    batches: Iterable[pa.RecordBatch],
    config: FlowPassConfig,
    task_counters: TaskCounters | None = None,
) -> Iterator[pa.RecordBatch]:
    with fewer_collections():
        yield from _partition(batches, config, task_counters)
    give_back_memory()  # the worker is reused, and idles through validation


def _partition(
    batches: Iterable[pa.RecordBatch], config: FlowPassConfig, task_counters: TaskCounters | None
) -> Iterator[pa.RecordBatch]:
    schema = output_schema()
    writer = TableFileWriter(
        config.table_folders(), config.batch_id, write_behind=config.write_behind
    )
    counters = RunCounters()

    states: list[tuple[list[TableRow], list[str | None]]] = []

    def sink(kind: str, rows: TableRows, keys: list[str | None]) -> None:
        if kind != STATE_KIND:
            counters.add(kind, rows)
            writer.add(kind, rows)
        elif rows:
            counters.carried += len(rows)
            states.append((list(rows), keys))

    runner = FlowRunner(config, sink)
    for batch in batches:
        runner.feed_batch(batch)
        runner.flush()
        for rows, keys in states:
            yield from _state_batches(schema, rows, keys)
        states.clear()
    runner.close()
    for rows, keys in states:
        yield from _state_batches(schema, rows, keys)
    written = writer.close()
    if task_counters is not None:
        frames = sum(counters.frames_by_command.values())
        task_counters.flows_decoded(runner.flows, frames, len(written))
    yield _files_batch(schema, written, counters)


@dataclass(slots=True)
class RunCounters:
    """What went into the tables, counted as the rows pass: the validation gate checks the
    tables it reads back against these."""

    frames_by_command: Counter[str] = default(default_factory=Counter)
    gap_bytes: int = 0
    violations: int = 0
    carried: int = 0  # connections still open, whose state rows the task output

    def add(self, table: str, rows: TableRows) -> None:
        if isinstance(rows, FrameRows):
            pairs = zip(rows.column("direction"), rows.column("command"), strict=True)
            self.frames_by_command.update(f"{d} {c}" for d, c in pairs)
        elif table == "frames":
            self.frames_by_command.update(f"{r['direction']} {r['command']}" for r in rows)
        elif table == "sessions":
            self.gap_bytes += sum(r["gap_bytes"] or 0 for r in rows)
            self.violations += sum(r["violations"] or 0 for r in rows)

    def to_json(self) -> str:
        return json.dumps(
            {
                "frames_by_command": dict(self.frames_by_command),
                "gap_bytes": self.gap_bytes,
                "violations": self.violations,
                "carried": self.carried,
            }
        )


def _state_batches(
    schema: pa.Schema, rows: list[TableRow], keys: list[str | None]
) -> Iterator[pa.RecordBatch]:
    """The state rows of connections carried (`dump_state`'s chunks, read as they go), in
    batches of about `CHUNK_BYTES`."""
    held: dict[str, list] = {"flow_key": [], "state": [], "record_offset": [], "session": []}
    size = 0
    for row, key in zip(rows, keys, strict=True):
        for number, chunk in enumerate(row["state"].chunks()):
            held["flow_key"].append(key)
            held["state"].append(chunk)
            held["record_offset"].append(number)
            held["session"].append(row["session_id"] if number == 0 else None)
            size += len(chunk)
            if size >= CHUNK_BYTES:
                yield _state_batch(schema, held)
                held = {name: [] for name in held}
                size = 0
    if held["state"]:
        yield _state_batch(schema, held)


def _state_batch(schema: pa.Schema, held: dict[str, list]) -> pa.RecordBatch:
    n = len(held["state"])
    columns = {name: pa.nulls(n, schema.field(name).type) for name in schema.names}
    columns["kind"] = pa.array([STATE_KIND] * n, pa.string())
    columns["flow_key"] = pa.array(held["flow_key"], pa.string())
    columns["state"] = pa.array(held["state"], pa.binary())
    columns["record_offset"] = pa.array(held["record_offset"], pa.int64())
    columns["open_session_id"] = pa.array(held["session"], pa.string())
    return pa.RecordBatch.from_pydict(columns, schema=schema)


def _files_batch(
    schema: pa.Schema, files: list[WrittenFile], counters: RunCounters
) -> pa.RecordBatch:
    n = len(files) + 1
    columns = {name: pa.nulls(n, schema.field(name).type) for name in schema.names}
    columns["kind"] = pa.array([FILE_KIND] * len(files) + [COUNTERS_KIND], pa.string())
    columns["table"] = pa.array([f.table for f in files] + [None], pa.string())
    columns["path"] = pa.array([f.path for f in files] + [None], pa.string())
    columns["rows"] = pa.array([f.rows for f in files] + [None], pa.int64())
    columns["counters"] = pa.array([None] * len(files) + [counters.to_json()], pa.string())
    return pa.RecordBatch.from_pydict(columns, schema=schema)


def flow_pass(
    packets: DataFrame,
    state: DataFrame | None,
    config: FlowPassConfig,
    partitions: int,
    task_counters: TaskCounters | None = None,
    cuts: Sequence[int] | None = None,
) -> DataFrame:
    """flow pieces (+ carried state rows) -> table files in `config.table_dirs`, and file,
    counter and state rows; see the module docstring. `task_counters` (progress) are added to
    as each task ends. `cuts`: the ``partitions - 1`` flow hashes where one task's flows end
    and the next one's begin (`pipeline.spark.placement.ranges`); without them, flows go to
    tasks by hash."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    from pipeline.spark.placement import route

    config.table_folders()  # refused here rather than in every task

    stream = packets.where(F.col("record_type") == "piece").select(
        "record_type", "flow_key", "file_id", "ts_ns", "record_offset", "packet_count", "packets"
    )
    if state is not None:
        stream = stream.unionByName(state, allowMissingColumns=True)
    columns = stream.columns
    # A 64-bit hash first: flow keys share long prefixes ("10.0.0.1|..."), which defeats the
    # sort's 8-byte key prefixes; the key itself still splits the (rare) hash collisions.
    stream = stream.withColumn("flow_hash", F.xxhash64("flow_key"))
    routed = route(F.col("flow_hash"), cuts) if cuts is not None else F.col("flow_hash")
    stream = (
        stream.withColumn("route", routed)
        .repartition(partitions, "route")
        .sortWithinPartitions(
            "flow_hash", "flow_key", F.col("ts_ns").asc_nulls_first(), "file_id", "record_offset"
        )
        .select(*columns)
    )
    return stream.mapInArrow(
        lambda it: run_partition(it, config, task_counters), from_arrow_schema(output_schema())
    )
