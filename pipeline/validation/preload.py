"""Import Great Expectations and the gate on a thread while the capture pass runs.

The gate needs GX only once the batch is computed, and importing it costs 2-2.5 s of Python
that would otherwise stand between the computed batch and its commit. It used to be imported
while the JVM started, but two cores are then busy (the JVM's start, the ledger's hashing), and
the import holds the GIL that the thread starting Spark needs for its calls into the JVM: the
session came 1 s late. The capture pass leaves a core idle while its first tasks wait for their
Python workers, and the driver only waits for the pass: the runner imports GX then, with
:func:`preloading_while` (0.58 / 2.26 GB: runs 0.5 / 1.0 s shorter; imported from the end of
the hashing instead, through the start's end and the pass, they were longer than both).

Two threads that import modules at once can deadlock on a circular import (CPython then fails
one of the imports). So the preload runs only while the other threads run calls that import
nothing (the capture pass's job, once it is planned; the progress display, once started: a test
checks it), and it is joined before the run goes on.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import TypeVar

THREAD_NAME = "stomp-lake-preload-gx"
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
