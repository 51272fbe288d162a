"""One place that knows how to start a SparkSession that works on this stack.

Pitfalls met on this stack: workers start the system Python unless told otherwise, Spark binds a
non-loopback address, ivy writes into $HOME, Parquet timestamps default to INT96, and scratch
folders land in the current directory unless placed.

Quiet by default: Spark's JVM logs through the shipped `log4j2.properties` (errors only), the
JVM's own start-up warning is dropped from its stderr, and PySpark's JSON query-context records
are off; `verbosity` 1 or 2 (`-v`, `-vv`) shows warnings or everything again.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.startup import class_archive
from pipeline.startup.jvm_output import jvm_output
from pipeline.startup.lean_home import use_lean_home

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
DEFAULT_DRIVER_MEMORY = "2g"
# One Arrow batch into the Python passes (pieces are large cells), held in the JVM's direct
# memory and by the Python worker: one 4.69 GB connection peaks at 2.02 GB PSS with 16 MB
# batches, 2.23 GB with 64 MB, at the same speed. With 16 MB a partition's pieces fit in one
# batch up to about 2 GB of input, so memory grew with the input until then: peak PSS 1.31 GB
# at 0.58 GB and 1.55 GB at 2.26 GB, against 1.27-1.29 and 1.43-1.44 GB with 4 MB (2 MB alike),
# at the same speed.
ARROW_BATCH_BYTES = 4 << 20
WORK_VARIABLE = "STOMP_LAKE_WORK"
LOG4J2_CONFIG = Path(__file__).with_name("log4j2.properties")
LOG_LEVELS = ("error", "warn", "info")  # Spark's level by verbosity 0, 1, 2
# Lines the JVM writes to its stderr before any logging is set up, with nothing to act on.
JVM_NOISE = ("WARNING: Using incubator modules: jdk.incubator.vector",)
# What starting a SparkSession imports for the first time in a run that has only imported
# pyspark.sql: imported before a start on a thread of its own, which then imports nothing while
# the run's thread may (`pipeline.runner.SparkStart`; see pipeline.startup.preload).
IMPORTED_BY_START = (
    "pandas",
    "pyspark.sql",
    "pyspark.testing.utils",
    "pyspark.logger.worker_io",
)
# A local run's JVM (driver and executor in one) compiles with C1 only: its work is many short
# queries (the validation suites) and shuffles, where C2's compile threads take more CPU than
# their faster code gives back; the flow pass's work is Python's. `stomp-lake run` on 0.58 GB,
# 2 cores, runs alternated: 35.8 / 35.6 s with C1 only, 46.1 / 42.0 s with C2 (validation
# 14.0 / 14.0 s against 20.3 / 17.5 s, Spark's start 5.2 / 4.9 against 6.7 / 6.5 s); on 2.26 GB
# 77.2 / 73.7 s against 89.8 / 80.9 s, the compute stage alike (47.5-47.7 against 48.0-50.9 s).
# With C1 alone the JVM reserves 48 MB for compiled code, not 240 MB: a long-lived session (the
# test suite's, an audit prompt) filled it with generated query code and died ("Out of space in
# CodeCache for adapters"). The tiered default is kept.
# It also collects with the serial collector: G1 grows its heap toward the 2 GB limit though
# little of it stays live, and keeps about 100 MB of its own structures. Peak PSS of the process
# tree, `stomp-lake run`: one 4.69 GB connection 2.29 GB against 2.90 GB with G1 (the JVM 1.37
# against 1.97 GB), 0.58 GB 1.47 / 1.48 against 1.96 / 2.07 GB, 2.26 GB 1.84 against 2.52 GB;
# times alike (2.26 GB: compute 39.3 / validate 14.9 s against 39.0 / 16.8 s).
# Its heap starts at 64 MB, not at the JVM's default of 1/64 of the machine's memory (378 MB
# here), below which the serial collector never shrinks it, and a shrink is done in one step,
# not damped over several collections: once the flow pass is over the run has the JVM give back
# what it no longer uses (`return_idle_heap`), so that it holds what stays live while
# validation takes its memory in the driver. Small messages, one 3.22 GB connection: the JVM
# 420 MB during validation against 666 MB, so the run's peak PSS 1.44 GB against about 1.7 GB.
# The heap grows as before while the flow pass runs (the shrinking ratios are set only at the
# end: set from the start, the collector ran 10% longer); starting small costs the 2 KB shape's
# compute 4% (2.26 GB: 9.8 against 9.4 s, three runs each, alternated).
LOCAL_JVM_OPTIONS = (
    "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC"
    " -Xms64m -XX:-ShrinkHeapInSteps"
)
# A local run's share of the heap for Spark's execution and storage memory (Spark's default 0.6:
# about 1 GB of the 2 GB driver). The flow pass sorts each task's flow pieces; one busy
# connection's pieces all go to one task, and the sort held them all in the heap until the pool
# ran out: small messages, one 3.22 GB connection, 281 MB of old generation and the JVM at
# 675-735 MB through the flow pass. With 0.08 (140 MB of the 2 GB driver) the sort spills to
# the scratch folder past it: the JVM 577 MB at the same speed, and with validation's smaller
# DuckDB (`pipeline.validation.local_sql`) the run's peak PSS (`bench_run`) 1.27 against
# 1.55 GB. Bounded by `--driver-memory`, not by the busiest connection.
LOCAL_MEMORY_FRACTION = "0.08"
# A JVM refuses to start with two collectors named: the user's choice replaces ours.
COLLECTOR_OPTION = re.compile(r"-XX:\+Use(?:Serial|Parallel(?:Old)?|G1|Z|Shenandoah|Epsilon)GC\b")
# PySpark logs every SQL error again as a JSON record with its stack trace.
QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


@dataclass(frozen=True, slots=True)
class SparkSettings:
    """How to start Spark, as the commands' shared options give it."""

    master: str = DEFAULT_MASTER
    driver_memory: str = DEFAULT_DRIVER_MEMORY
    conf: Mapping[str, str] = field(default_factory=dict)
    verbosity: int = 0  # -1 quiet, 0 default, 1-2 verbose

    def start(self, app_name: str = "stomp-lake") -> SparkSession:
        return build_spark(
            self.master,
            app_name,
            self.conf,
            driver_memory=self.driver_memory,
            verbosity=self.verbosity,
        )


def scratch_dir() -> Path:
    """Spark's scratch space (shuffle spill, warehouse, ivy): $STOMP_LAKE_WORK, else a folder of
    this user's under $TMPDIR; never the caller's current folder."""
    configured = os.environ.get(WORK_VARIABLE)
    if configured:
        return Path(configured).resolve()
    return Path(tempfile.gettempdir()).resolve() / f"stomp-lake-{os.getuid()}"


def base_conf(
    master: str,
    *,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
    verbosity: int = 0,
    scratch: Path | None = None,
) -> dict[str, str]:
    work = scratch or scratch_dir()
    level = LOG_LEVELS[min(max(verbosity, 0), len(LOG_LEVELS) - 1)]
    java_options = (
        f"-Dlog4j2.configurationFile={LOG4J2_CONFIG.as_uri()} -Dstomp_lake.log_level={level}"
        + (" -Dstomp_lake.task_log_level=error" if verbosity > 0 else "")
    )
    conf = {
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.jars.ivy": str(work / "ivy"),
        "spark.local.dir": str(work / "spark-tmp"),
        "spark.sql.warehouse.dir": str(work / "spark-warehouse"),
        "spark.driver.extraJavaOptions": java_options,
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": driver_memory,
        "spark.sql.shuffle.partitions": "8",
        "spark.python.worker.reuse": "true",
        # Spark's default has no byte limit
        "spark.sql.execution.arrow.maxBytesPerBatch": str(ARROW_BATCH_BYTES),
    }
    if master.startswith("local"):
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
        conf["spark.driver.extraJavaOptions"] += f" {LOCAL_JVM_OPTIONS}"
        conf["spark.python.daemon.module"] = "pipeline.startup.worker_daemon"
        conf["spark.memory.fraction"] = LOCAL_MEMORY_FRACTION
        archive = class_archive.java_options()
        if archive:
            conf["spark.driver.extraJavaOptions"] += f" {archive}"
    return conf


def merge_conf(conf: dict[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """`extra` (the user's `--conf`) wins, except that Java options are appended to ours so the
    logging configuration stays unless the user names one of their own (a collector they name
    replaces ours: see `COLLECTOR_OPTION`)."""
    merged = dict(conf)
    for key, value in extra.items():
        if key == "spark.driver.extraJavaOptions" and key in merged:
            ours = merged[key]
            if COLLECTOR_OPTION.search(value):
                ours = COLLECTOR_OPTION.sub("", ours)
            merged[key] = f"{ours} {value}"
        else:
            merged[key] = value
    return merged


def build_spark(
    master: str = DEFAULT_MASTER,
    app_name: str = "stomp-lake",
    extra_conf: Mapping[str, str] | None = None,
    *,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
    verbosity: int = 0,
) -> SparkSession:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Executors on a cluster import our modules; they find them through the driver's sys.path.
    repo_root = str(Path(__file__).resolve().parents[2])
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if repo_root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([repo_root, *paths])

    from pyspark.sql import SparkSession

    if master.startswith("local"):
        use_lean_home()
    conf = base_conf(master, driver_memory=driver_memory, verbosity=verbosity)
    conf = merge_conf(conf, extra_conf or {})
    _private_dir(Path(conf["spark.local.dir"]))
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    quiet_query_context(verbosity)
    starting = SparkSession.getActiveSession() is None
    noise = JVM_NOISE if verbosity <= 0 else ()  # -v and -vv show everything
    with jvm_output(noise) if starting else contextlib.nullcontext():
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(LOG_LEVELS[min(max(verbosity, 0), 2)].upper())
    return spark


def _private_dir(path: Path) -> None:
    old = os.umask(0o077)
    try:
        path.mkdir(parents=True, exist_ok=True)
    finally:
        os.umask(old)


def quiet_query_context(verbosity: int) -> None:
    """PySpark's JSON records of SQL errors off (verbosity 0) or on. PySpark creates these
    loggers with its own logger class, so they are made through it, never as plain loggers."""
    from pyspark.logger import PySparkLogger

    for name in QUERY_CONTEXT_LOGGERS:
        PySparkLogger.getLogger(name).disabled = verbosity == 0


def return_idle_heap(spark: SparkSession) -> None:
    """A local run's JVM, once its share of the work is done (the flow pass), gives back to the
    system the heap it grew and no longer uses, while validation (DuckDB, in this process) and
    the commit (delta-rs) take theirs: the heap is to keep at most 30% free (HotSpot's
    MaxHeapFreeRatio, set at run time), then collected in full. Only with a local master: a
    cluster's JVMs are its own."""
    if not (spark.sparkContext.master or "").startswith("local"):
        return
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    diagnostic = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    )
    for option, percent in (("MinHeapFreeRatio", "10"), ("MaxHeapFreeRatio", "30")):
        diagnostic.setVMOption(option, percent)
    jvm.java.lang.System.gc()
