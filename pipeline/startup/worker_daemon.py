"""Spark's Python worker daemon (`spark.python.daemon.module`) with a local master: PySpark's
own, importing PySpark from the installed package rather than from ``pyspark.zip``.

Spark puts the zip of PySpark's sources first on its workers' path. A module imported from a
zip is compiled from source every time (the zip holds no bytecode, and no cache is written), so
the daemon compiled a third of PySpark (0.4 s) before it could fork the first worker, and every
run's first tasks waited for it. With a local master the installed package is the same release
as the zip (pip installs both), and its bytecode is cached. On a cluster the executors' zip is
Spark's own and PySpark's daemon stays.

The zips are taken off the path altogether, not just put last, and so is the jar of Spark's core
that Spark puts there too (5,854 entries, no Python), with the importers made for them: a
worker's first task adds Spark's files folder to its path and invalidates the import caches, and
the import system then read the directories of every archive it had an importer for again: 0.2 s
of CPU in each worker (0.58 GB: the capture pass's first tasks spent 0.21 s in Python against
0.38-0.56 s; the run's time moved within its noise, the cores being busy then with the JVM's
planning and GX's import).

The daemon also imports, before it forks any worker, the modules every worker of a run imports
(`PRELOADED`): a worker is a fork of the daemon, so it starts with them. A run forks a worker
per task slot and stage (6 for `stomp-lake run` on 2 cores), and each imported them itself:
0.5-0.75 s of CPU each (pandas among them, which pyarrow imports at its first conversion of a
Python list). 0.58 GB: 12.7-13.4 s against 13.3-14.4 s, runs alternated.

What the daemon holds by then is frozen out of the cyclic collector (`gc.freeze`, as Python's
documentation advises before forking): a worker collects in full after every task, and each
full collection wrote to the header of every object it inherited, copying the daemon's pages
into the worker. The workers' PSS at a run's peak, 0.58 GB: 400 against 437 MB.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import socket
import sys
import zipimport
from collections.abc import Callable
from typing import Any

# pyspark.daemon.worker: a forked worker serving tasks on its socket; its exit code
Worker = Callable[[socket.socket, bool], int]
PRELOADED = ("pandas", "pyarrow", "pipeline.spark.captures", "pipeline.spark.flows")


def without_spark_archives(path: list[str]) -> list[str]:
    """``path`` without Spark's zips of PySpark and Py4J and its jars."""
    return [entry for entry in path if not _spark_archive(entry)]


def forget_archive_importers(cache: dict[str, Any], path: list[str]) -> None:
    """Drops from ``cache`` (`sys.path_importer_cache`) the importers of archives no longer on
    ``path``: the import system invalidates every importer it holds, on the path or not."""
    for key, finder in list(cache.items()):
        if isinstance(finder, zipimport.zipimporter) and finder.archive not in path:
            del cache[key]


def quiet_when_hung_up(worker: Worker) -> Worker:
    """PySpark's forked worker, ending with code 1 and no traceback when the JVM hangs up on it
    (its job failed or was cancelled: a full disk under `stomp-lake run`): the JVM reports that
    failure itself, and the daemon's traceback of the reset socket only buried the run's one
    line. The JVM may hang up before it has said anything, as a job fails while it asks for a
    worker: the worker's first read, of the JVM's secret, then ends the stream (EOFError).
    Errors of a task are not raised here: the worker sends them to the JVM."""

    def run(sock: socket.socket, authenticated: bool) -> int:
        try:
            return worker(sock, authenticated)
        except (ConnectionResetError, BrokenPipeError, EOFError):
            return 1

    return run


def _spark_archive(entry: str) -> bool:
    name = entry.rsplit("/", 1)[-1]
    return (
        name == "pyspark.zip"
        or (name.startswith("py4j-") and name.endswith(".zip"))
        or name.endswith(".jar")
    )


if __name__ == "__main__":
    sys.path[:] = without_spark_archives(sys.path)
    forget_archive_importers(sys.path_importer_cache, sys.path)
    for name in PRELOADED:
        # One that fails here fails again in the first task that needs it, which reports it.
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    from pyspark import daemon

    daemon.worker = quiet_when_hung_up(daemon.worker)  # type: ignore[assignment]  # a function replaced
    gc.collect()
    gc.freeze()

    daemon.manager()
