"""Spark's Python worker daemon (`spark.python.daemon.module`) with a local master: PySpark's
own, importing PySpark from the installed package rather than from ``pyspark.zip``.

Spark puts the zip of PySpark's sources first on its workers' path. A module imported from a
zip is compiled from source every time (the zip holds no bytecode, and no cache is written), so
the daemon compiled a third of PySpark (0.4 s) before it could fork the first worker, and every
run's first tasks waited for it. With a local master the installed package is the same release
as the zip (pip installs both), and its bytecode is cached. On a cluster the executors' zip is
Spark's own and PySpark's daemon stays.

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
import sys

PRELOADED = ("pandas", "pyarrow", "pipeline.spark.captures", "pipeline.spark.flows")


def installed_first(path: list[str]) -> list[str]:
    """``path`` with Spark's zips of PySpark and Py4J moved after everything else."""
    zips = [entry for entry in path if _spark_zip(entry)]
    return [entry for entry in path if not _spark_zip(entry)] + zips


def _spark_zip(entry: str) -> bool:
    name = entry.rsplit("/", 1)[-1]
    return name == "pyspark.zip" or (name.startswith("py4j-") and name.endswith(".zip"))


if __name__ == "__main__":
    sys.path[:] = installed_first(sys.path)
    for name in PRELOADED:
        # One that fails here fails again in the first task that needs it, which reports it.
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    from pyspark.daemon import manager

    gc.collect()
    gc.freeze()

    manager()
