"""One batch of `stomp-lake run`: capture files -> the lake's Delta tables, incrementally and
idempotently. Commands parse arguments and print; this module does the work (kedro's runner apart
from its command line).

Order of a batch, chosen so a run killed anywhere can simply be run again:
begin (pending batch names its files) -> compute -> validate -> write carried connection state
-> commit each table (skipped when the table already holds the batch) -> ledger -> move the state
pointer -> finish (pending mark removed). Everything large is written before the first commit, so
a full disk leaves the tables as they were.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import schemas
from pipeline.errors import UsageError
from pipeline.inputs import NOT_A_CAPTURE, STALE_PARTIAL, check_inputs, stale_partials, tls_keylog
from pipeline.lake.batches import PendingBatch
from pipeline.lake.failpoints import failpoint
from pipeline.lake.front import LakeFront
from pipeline.net import DEFAULT_BROKER_PORTS
from pipeline.process import fewer_collections
from pipeline.session import ModelOptions
from pipeline.spark.session import IMPORTED_BY_START, SparkSettings, return_idle_heap
from pipeline.startup.preload import preloading
from pipeline.validation import VALIDATION_ENGINES
from pipeline.validation.quarantine import BatchQuarantined, is_quarantined
from pipeline.validation.suites import SUITE_NAMES

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(slots=True)
class RunConfig:
    inputs: list[Path]
    lake: Path
    spark: SparkSettings = field(default_factory=SparkSettings)  # verbosity: Spark's logging too
    batch_id: str | None = None
    options: ModelOptions = field(default_factory=ModelOptions)
    broker_ports: tuple[int, ...] = DEFAULT_BROKER_PORTS
    close_open: bool = False
    wait_lock: float = 0.0
    validate: bool = True
    validation_engine: str = "auto"  # one of pipeline.validation.VALIDATION_ENGINES
    # NSS key log files or folders of them, for TLS connections (besides the secrets that
    # pcapng inputs embed: `pipeline.ingest.secrets`)
    tls_keylogs: tuple[Path, ...] = ()


@dataclass(slots=True)
class RunResult:
    batch_id: str | None
    files: int
    counts: dict[str, Any]
    elapsed_s: float
    tables: dict[str, int] = field(default_factory=dict)  # table -> version after the run
    skipped_files: dict[str, list[str]] = field(default_factory=dict)
    # seconds per stage: "spark_start", "compute", "validate", "commit"
    timings: dict[str, float] = field(default_factory=dict)
    validation: Any = None  # the gate's ValidationReport when the batch was validated


def run(config: RunConfig, progress: Callable[[str], None] = print) -> RunResult:
    started = time.monotonic()
    validates_on_duckdb(config)  # an unknown engine is refused before any work
    captures, not_captures = check_inputs(
        config.inputs, config.tls_keylogs, close_open=config.close_open
    )
    starting = SparkStart(config)
    # The driver's Python makes GX's and the gate's many containers and almost no cycles: with
    # Python's thresholds, collections walked them again and again (0.58 GB: validation 1.20-1.23
    # against 1.35-1.50 s, the driver's CPU 0.3 s less; runs alternated).
    with (
        fewer_collections(),
        LakeFront.open(config.lake, wait_lock=config.wait_lock) as front,
        starting,
    ):
        pending = front.pending()
        if pending is not None:
            progress(
                f"resuming batch {pending.batch_id} left unfinished by an earlier run (its own "
                "files only: files added since wait for the next run)"
            )
            batch, skipped = pending, {}
        else:
            try:
                scan = front.scan(captures, on_first_unseen=starting.begin)
            finally:
                # Until the JVM is up this process's stdout and stderr are pipes that threads
                # forward (pipeline.startup.jvm_output): nothing is printed before, lest it be
                # lost to a kill or come after lines printed later.
                starting.wait()
            skipped = _skipped(scan)
            if not_captures:
                # Out of the ledger, so they are reported again while they are there.
                skipped[NOT_A_CAPTURE] = [f"{p}: {why}" for p, why in not_captures.items()]
            partials = stale_partials(config.inputs)
            if partials:
                skipped[STALE_PARTIAL] = partials
            if not scan.new and config.batch_id and is_quarantined(front.lake, config.batch_id):
                raise BatchQuarantined(front.lake, config.batch_id)
            if not scan.new and not config.close_open:
                progress("no new capture files")
                return RunResult(None, 0, {}, time.monotonic() - started, skipped_files=skipped)
            batch = front.begin(scan.new, config.batch_id)
        if front.complete_but_for_its_mark(batch):
            progress(f"batch {batch.batch_id} was complete but for its final mark")
            return RunResult(batch.batch_id, len(batch.files), {}, time.monotonic() - started)
        result = _run_batch(config, front, batch, progress, starting)
        result.skipped_files = skipped
        result.elapsed_s = time.monotonic() - started
        return result


class SparkStart:
    """The run's SparkSession, started either where the batch needs it or, through :meth:`begin`,
    on a thread while the driver hashes new files for the ledger (2.26 GB: 0.2 s of hashing and
    1.2-1.7 s of Spark's start).

    A session started early and never used (the files were all ingested before under other
    names) is stopped when the run leaves the ``with`` block. Nothing starts early when a session
    is already running in the process: that start would be instant, and stopping it not ours.
    """

    THREAD_NAME = "stomp-lake-spark-start"

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self._pool: ThreadPoolExecutor | None = None
        self._early: Future[SparkSession] | None = None
        self._used = False
        self.waited_s = 0.0  # how long the run waited for a start under way

    def begin(self) -> None:
        from pyspark import SparkContext

        if self._early is not None or SparkContext._active_spark_context is not None:
            return
        # Imported here, on the thread that goes on hashing, so that the starting thread imports
        # nothing while this one may (see pipeline.startup.preload).
        for name in IMPORTED_BY_START:
            importlib.import_module(name)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix=self.THREAD_NAME)
        self._early = self._pool.submit(self._start)

    def wait(self) -> None:
        """Until a start under way has ended, whatever its outcome (``session`` reports it)."""
        if self._early is not None:
            mark = time.monotonic()
            wait_for([self._early])
            self.waited_s += time.monotonic() - mark

    def session(self) -> SparkSession:
        self._used = True
        return self._start() if self._early is None else self._early.result()

    def __enter__(self) -> SparkStart:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._early is None or self._pool is None:
            return
        self._pool.shutdown(wait=True)
        if not self._used and self._early.exception() is None:
            self._early.result().stop()

    def _start(self) -> SparkSession:
        return self.config.spark.start()


def _skipped(scan: Any) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    if scan.duplicates:
        out["same content as an ingested file"] = [d.file.path for d in scan.duplicates]
    if scan.changed:
        out["changed since it was ingested"] = [f.path for f in scan.changed]
    if scan.problems:
        out["unreadable or still changing"] = [f"{p.path}: {p.detail}" for p in scan.problems]
    return out


def _run_batch(
    config: RunConfig,
    front: LakeFront,
    batch: PendingBatch,
    progress: Callable[[str], None],
    starting: SparkStart,
) -> RunResult:
    from pyspark import StorageLevel

    from pipeline.spark.anomalies import capture_anomaly_rows
    from pipeline.spark.captures import packets_frame
    from pipeline.spark.flows import STATE_KIND, FlowPassConfig, flow_pass
    from pipeline.spark.placement import outweighs_a_task, ranges, task_count
    from pipeline.spark.summary import capture_summary, flow_output
    from pipeline.spark.table_files import write_table_rows
    from pipeline.spark.task_counters import TaskCounters

    timings: dict[str, float] = {}
    mark = time.monotonic()
    batch_id, paths = batch.batch_id, [f.path for f in batch.files]
    progress(f"batch {batch_id}: {len(paths)} capture files")
    front.clean_up()
    spark = starting.session()
    timings["spark_start"] = _lap(mark) + starting.waited_s
    attach = getattr(progress, "attach", None)  # a live display polls Spark's status tracker
    if attach is not None:
        attach(spark)
    mark = time.monotonic()
    counters = TaskCounters.create(spark)
    progress("stage 1/4: reading packets")
    sizes = [f.size for f in batch.files]
    _figures(progress, lambda: counters.reading(sizes))
    keylog = tls_keylog(config.tls_keylogs, paths)
    packets = packets_frame(spark, paths, counters=counters, tls_randoms=len(keylog) > 0)
    # On disk, not in the JVM's heap: held there, the pieces (48 bytes a packet) grew the local
    # JVM by their size (2.26 GB: peak PSS 1.69 against 1.75-1.84 GB, the same speed).
    packets = packets.persist(StorageLevel.DISK_ONLY)
    # GX is imported for the gate meanwhile (see pipeline.startup.preload).
    with preloading(config.validate):
        # The capture pass runs here, in a job of its own, so that stage 1 is the reading.
        summary = capture_summary(packets)
        stats = summary.stats
        weights, packet_count = summary.flow_weights, stats.get("tcp_packets", 0)
        partitions = task_count(spark.sparkContext.defaultParallelism, packet_count)
        cuts = ranges(weights, packet_count, partitions)
        # The flow pass's tasks write the tables' Parquet into these folders themselves.
        folders = front.table_folders(batch, schemas.TABLES)
        flow_config = FlowPassConfig(
            tuple(paths),
            config.options,
            config.broker_ports,
            config.close_open,
            table_dirs=tuple((name, str(folder / "parquet")) for name, folder in folders.items()),
            batch_id=batch_id,
            write_behind=outweighs_a_task(weights, packet_count, partitions),
            tls_keys=keylog.only(summary.client_randoms) if len(keylog) else None,
        )
        if len(keylog):
            found = len(flow_config.tls_keys or ())
            progress(
                f"TLS: secrets for {found} of the {len(summary.client_randoms)} TLS "
                f"connections read ({len(keylog)} in the key logs)"
            )
        state = front.carried_state(spark)
        progress("stage 2/4: decoding sessions, staging tables")
        _figures(progress, counters.decoding)
        flow_rows = flow_pass(packets, state, flow_config, partitions, counters, cuts)
        flow_rows = flow_rows.persist(StorageLevel.MEMORY_AND_DISK)
        written, counts = flow_output(flow_rows)
        capture_rows = capture_anomaly_rows(summary.anomalies, paths)
        anomalies_dir = str(folders["anomalies"] / "parquet")
        for extra in write_table_rows("anomalies", capture_rows, anomalies_dir, batch_id):
            written.setdefault("anomalies", []).append(extra.path)
        counts["anomalies"] += len(capture_rows)
        counts.update(stats)
        spark_validates = config.validate and not validates_on_duckdb(config)
        staged = front.stage(spark, batch, folders, written, read_now=spark_validates)
    packets.unpersist()  # read for the last time above; flow_rows stays for the carried state
    if validates_on_duckdb(config):
        return_idle_heap(spark)
    timings["compute"] = _lap(mark)
    failpoint("run.staged")
    # The state rows of the connections left open, for the next batch; None when none is open
    # (no Spark job to write nothing).
    carried_rows = flow_rows.where(f"kind = '{STATE_KIND}'") if counts["open_connections"] else None
    report = None
    if config.validate:
        mark = time.monotonic()
        from pipeline.validation.gate import ValidationFailed, validate_batch

        progress("stage 3/4: validating")
        suites = Tally("suites", len(SUITE_NAMES))
        _figures(progress, suites.describe)
        open_sessions = None
        if counts["open_connections"]:
            kept = flow_rows.where(f"kind = '{STATE_KIND}' AND open_session_id IS NOT NULL")
            open_sessions = kept.selectExpr("open_session_id AS session_id")
        try:
            report = validate_batch(
                spark,
                front.lake,
                batch_id,
                staged.frames,
                counts,
                open_sessions=open_sessions,
                suite_done=suites.update,
                local_files=staged.local_files() if validates_on_duckdb(config) else None,
                staged=staged.staged,
            )
        except ValidationFailed:
            front.set_aside(staged, batch, carried_rows)  # in the quarantine, not lost
            raise
        finally:
            timings["validate"] = _lap(mark)
    else:
        progress("stage 3/4: validation skipped (--no-validate)")
    mark = time.monotonic()
    failpoint("run.validated")
    progress("stage 4/4: committing")
    tables = Tally("tables", len(staged.staged) + len(staged.computed))
    _figures(progress, tables.describe)
    versions = front.commit(staged, batch, carried_rows, tables.update)
    flow_rows.unpersist()
    timings["commit"] = _lap(mark)
    result = RunResult(batch_id, len(paths), counts, 0.0, versions, timings=timings)
    result.validation = report
    return result


def validates_on_duckdb(config: RunConfig) -> bool:
    """Whether the validation suites run on DuckDB in the driver (`pipeline.validation.local_sql`):
    asked for, or ``auto`` with a local master. On a cluster the batch may outgrow the driver,
    and Spark validates it where it is."""
    engine = config.validation_engine
    if engine not in VALIDATION_ENGINES:
        known = ", ".join(VALIDATION_ENGINES)
        raise UsageError(f"validation engine {engine!r} (--validation-engine): one of {known}")
    return engine == "duckdb" or (engine == "auto" and config.spark.master.startswith("local"))


@dataclass(slots=True)
class Tally:
    """Units of a stage done on the driver (suites validated, tables committed), for progress."""

    unit: str
    total: int
    done: int = 0

    def update(self, done: int, total: int) -> None:
        self.done, self.total = done, total

    def describe(self) -> str:
        return f"{self.done}/{self.total} {self.unit}"


def _figures(progress: Callable[[str], None], describe: Callable[[], str]) -> None:
    """Hand the stage's figures to a progress display that shows them (`RunProgress.figures`);
    a plain callable such as `print` gets the stage lines only."""
    show = getattr(progress, "figures", None)
    if show is not None:
        show(describe)


def _lap(mark: float) -> float:
    return round(time.monotonic() - mark, 3)
