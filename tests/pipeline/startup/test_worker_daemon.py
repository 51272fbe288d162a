"""pipeline/startup/worker_daemon.py: with a local master, Spark's Python workers import PySpark
from the installed package (bytecode cached), not from Spark's zip of its sources."""

from __future__ import annotations

import socket
import zipfile
import zipimport
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pipeline.spark.session import base_conf
from pipeline.startup.worker_daemon import (
    PRELOADED,
    forget_archive_importers,
    quiet_when_hung_up,
    without_spark_archives,
)

SITE = "/venv/lib/python3.11/site-packages"
ZIP = "/venv/lib/python3.11/site-packages/pyspark/python/lib/pyspark.zip"
PY4J = "/venv/lib/python3.11/site-packages/pyspark/python/lib/py4j-0.10.9.9-src.zip"


JAR = "/venv/lib/python3.11/site-packages/pyspark/jars/spark-core_2.13-4.2.0.jar"


def test_sparks_archives_are_taken_off_the_path() -> None:
    path = [ZIP, PY4J, "/work", JAR, SITE, "/other/py4j.zip"]
    assert without_spark_archives(path) == ["/work", SITE, "/other/py4j.zip"]
    assert without_spark_archives([SITE]) == [SITE]


def test_importers_of_archives_off_the_path_are_forgotten(tmp_path: Path) -> None:
    kept, dropped = tmp_path / "kept.zip", tmp_path / "dropped.zip"
    for archive in (kept, dropped):
        with zipfile.ZipFile(archive, "w") as made:
            made.writestr("module.py", "")
    cache: dict[str, object] = {
        str(kept): zipimport.zipimporter(str(kept)),
        str(dropped): zipimport.zipimporter(str(dropped)),
        f"{dropped}/org": zipimport.zipimporter(f"{dropped}/org/"),
        SITE: None,
    }
    forget_archive_importers(cache, [str(kept), SITE])
    assert list(cache) == [str(kept), SITE]


def _zip_importers(rows: Iterable[int]) -> Iterator[list[str]]:
    import sys

    importers = sys.path_importer_cache.values()
    yield [finder.archive for finder in importers if isinstance(finder, zipimport.zipimporter)]


def test_a_worker_the_jvm_hangs_up_on_ends_quietly() -> None:
    def hung_up(_sock: socket.socket, _authenticated: bool) -> int:
        raise ConnectionResetError(104, "Connection reset by peer")

    def hung_up_before_the_secret(sock: socket.socket, _authenticated: bool) -> int:
        from pyspark.serializers import UTF8Deserializer

        with sock.makefile("rb") as infile:  # as PySpark's worker reads the JVM's secret
            return len(UTF8Deserializer().loads(infile))

    def failing(_sock: socket.socket, _authenticated: bool) -> int:
        raise ValueError("not a hang-up")

    ours, _theirs = socket.socketpair()
    with ours, _theirs:
        assert quiet_when_hung_up(hung_up)(ours, False) == 1
        _theirs.shutdown(socket.SHUT_WR)  # the JVM's end, gone before it wrote a byte
        assert quiet_when_hung_up(hung_up_before_the_secret)(ours, False) == 1
        assert quiet_when_hung_up(lambda _sock, _auth: 0)(ours, True) == 0
        with pytest.raises(ValueError):
            quiet_when_hung_up(failing)(ours, False)


def test_workers_hold_no_importer_of_sparks_archives(spark: SparkSession) -> None:
    found = spark.sparkContext.parallelize([0], 1).mapPartitions(_zip_importers).collect()
    assert found == [[]]


def test_only_a_local_master_replaces_the_daemon() -> None:
    assert base_conf("local[2]")["spark.python.daemon.module"] == "pipeline.startup.worker_daemon"
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
