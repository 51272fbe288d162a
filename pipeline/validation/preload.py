"""Import Great Expectations and the gate on a thread while the JVM starts.

The gate needs GX only once the batch is computed, and importing it costs 3-7 s of Python that
would otherwise stand between the computed batch and its commit. Starting Spark costs as much,
and in that time the driver only waits for the JVM: :func:`preloading_while` imports GX then.

Two threads that import modules at once can deadlock on a circular import (CPython then fails
one of the imports). So the preload runs only while the other thread runs a call that imports
nothing (``build_spark``, once :data:`IMPORTED_BY_SPARK_START` are imported: a test checks it),
and it is joined before that thread goes on.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import TypeVar

THREAD_NAME = "stomp-lake-preload-gx"
# What starting a SparkSession imports for the first time in a run that has only imported
# pyspark.sql: imported before the preload starts, so that building the session imports nothing.
IMPORTED_BY_SPARK_START = (
    "pandas",
    "pyspark.sql",
    "pyspark.testing.utils",
    "pyspark.logger.worker_io",
)
PRELOADED = (
    "great_expectations",
    "pipeline.validation.gate",
    "pipeline.validation.expectations",
    "duckdb_engine",  # SQLAlchemy's DuckDB dialect: the suites on DuckDB (local_sql)
)

T = TypeVar("T")


def preloading_while(call: Callable[[], T]) -> T:
    """``call()`` (which must import nothing) with GX and the gate imported meanwhile on a
    thread; returns once both are done. An import that fails there is left to the gate, which
    imports the same modules again and reports the error."""
    for name in IMPORTED_BY_SPARK_START:
        importlib.import_module(name)
    thread = threading.Thread(target=_import_gate, name=THREAD_NAME, daemon=True)
    thread.start()
    try:
        return call()
    finally:
        thread.join()


def _import_gate() -> None:
    try:
        for name in PRELOADED:
            importlib.import_module(name)
    except Exception:  # noqa: BLE001,S110  the gate imports it again and reports the error
        pass
