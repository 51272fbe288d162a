"""pipeline/spark/worker_daemon.py: with a local master, Spark's Python workers import PySpark
from the installed package (bytecode cached), not from Spark's zip of its sources."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from pyspark.sql import SparkSession

from pipeline.spark.session import base_conf
from pipeline.spark.worker_daemon import PRELOADED, installed_first

SITE = "/venv/lib/python3.11/site-packages"
ZIP = "/venv/lib/python3.11/site-packages/pyspark/python/lib/pyspark.zip"
PY4J = "/venv/lib/python3.11/site-packages/pyspark/python/lib/py4j-0.10.9.9-src.zip"


def test_sparks_zips_go_after_everything_else_in_order() -> None:
    path = [ZIP, PY4J, "/work", SITE, "/other/py4j.zip"]
    assert installed_first(path) == ["/work", SITE, "/other/py4j.zip", ZIP, PY4J]
    assert installed_first([SITE]) == [SITE]


def test_only_a_local_master_replaces_the_daemon() -> None:
    assert base_conf("local[2]")["spark.python.daemon.module"] == "pipeline.spark.worker_daemon"
    assert "spark.python.daemon.module" not in base_conf("spark://master:7077")


def _where_pyspark_is(rows: Iterable[int]) -> Iterator[str]:
    import pyspark

    yield pyspark.__file__ or ""


def test_workers_import_the_installed_pyspark(spark: SparkSession) -> None:
    found = spark.sparkContext.parallelize([0], 1).mapPartitions(_where_pyspark_is).collect()
    assert found and all(".zip" not in where and where.endswith(".py") for where in found)


def _preloaded_before_the_task(rows: Iterable[int]) -> Iterator[list[str]]:
    import sys

    yield [name for name in PRELOADED if name in sys.modules]


def test_workers_start_with_the_preloaded_modules(spark: SparkSession) -> None:
    """Imported by the daemon before it forked the worker: this test's module imports none."""
    rdd = spark.sparkContext.parallelize([0, 1], 2)
    found = rdd.mapPartitions(_preloaded_before_the_task).collect()
    assert found == [list(PRELOADED)] * 2


def _frozen_objects(rows: Iterable[int]) -> Iterator[int]:
    import gc

    yield gc.get_freeze_count()


def test_workers_inherit_the_daemons_objects_frozen(spark: SparkSession) -> None:
    """Never walked by a worker's collections: its copy-on-write pages stay the daemon's."""
    found = spark.sparkContext.parallelize([0], 1).mapPartitions(_frozen_objects).collect()
    assert found and found[0] > 10_000
