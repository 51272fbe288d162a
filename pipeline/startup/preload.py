"""Import Great Expectations and the gate on a thread while the passes run.

The gate needs GX only once the batch is computed, and importing it costs 2-2.5 s of Python
that would otherwise stand between the computed batch and its commit. It used to be imported
while the JVM started, but two cores are then busy (the JVM's start, the ledger's hashing), and
the import holds the GIL that the thread starting Spark needs for its calls into the JVM: the
session came 1 s late. The runner now imports it with :func:`preloading` while the passes run
(from the capture pass to the tables' staging): the capture pass leaves a core idle while its
first tasks wait for their Python workers, and the driver only waits for the passes
(0.58 / 2.26 GB: runs 0.5-1.0 / 1.5 s shorter; imported from the end of the hashing instead,
through the start's end, they were longer than both). With the ledger's hashing down to 0.2 s
(XXH3-128), importing it from the hashing's end left a core to it during the JVM's start, but the
session still came 0.3-0.5 s later, the GIL switched every 0.5 ms: 2.26 GB, no faster over 3
alternated pairs.

Two threads that import modules at once can deadlock on a circular import (CPython then fails
one of the imports). So the preload runs only while the run's other threads import nothing
(`IMPORTED_FIRST` are imported before it starts; tests/pipeline/startup/test_preload.py
records every import of a run, with and without a live progress display), and it is joined
before the run goes on. The modules GX imports and our suites never use are left to their first
use (`pipeline.startup.deferred`).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from pipeline.startup.deferred import deferring

THREAD_NAME = "stomp-lake-preload-gx"
# Imported lazily by the standard library where the run's thread would meet it in the block: the
# first connection to a host by name encodes the name with the IDNA codec.
IMPORTED_FIRST = ("encodings.idna",)
PRELOADED = (
    "great_expectations",
    "pipeline.validation.gate",
    "pipeline.validation.expectations",
    "duckdb_engine",  # SQLAlchemy's DuckDB dialect: the suites on DuckDB (local_sql)
)


@contextmanager
def preloading(enabled: bool = True) -> Iterator[None]:
    """GX and the gate imported on a thread while the block runs (whose threads must import
    nothing), joined when it ends. An import that fails there is left to the gate, which imports
    the same modules again and reports the error."""
    if not enabled:
        yield
        return
    for name in IMPORTED_FIRST:
        importlib.import_module(name)
    thread = threading.Thread(target=_import_gate, name=THREAD_NAME, daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join()


def _import_gate() -> None:
    try:
        with deferring():
            for name in PRELOADED:
                importlib.import_module(name)
    except Exception:  # noqa: BLE001,S110  the gate imports it again and reports the error
        pass
