"""Shared fixtures. One SparkSession for the whole run (for each pytest-xdist worker), as Delta's
DeltaTestCase does."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


# A pytest-xdist worker's __main__ has neither a spec nor a file, which pyspark.sql.connect (that
# Great Expectations imports) takes for a doctest run without Spark Connect's packages: it
# exits the process. A worker's __main__ is named for what it is.
_MAIN = sys.modules["__main__"]
if getattr(_MAIN, "__spec__", None) is None and not hasattr(_MAIN, "__file__"):
    _MAIN.__file__ = "<pytest worker>"


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    os.environ.setdefault("STOMP_LAKE_WORK", str(tmp_path_factory.mktemp("spark-work")))
    from pipeline.spark.session import build_spark

    session = build_spark("local[2]", app_name="stomp-lake-tests")
    yield session
    session.stop()


# The files that take minutes, longest first (the ingestion DAG's before the maintenance DAG's,
# which reads the lake it makes). `make test` hands whole files to two workers in the order
# collected: one of these drawn last is a tail that one worker runs alone.
LONGEST_FIRST = (
    "tests/pipeline/validation/test_gate.py",
    "tests/dags/test_stomp_lake_ingest.py",
    "tests/dags/test_scheduler.py",
    "tests/dags/test_readme_airflow.py",
    "tests/pipeline/validation/test_checks.py",
    "tests/pipeline/commands/test_run_full_disk.py",
    "tests/pipeline/commands/test_run_faults.py",
    "tests/dags/test_stomp_lake_maintenance.py",
    "tests/pipeline/test_process.py",
    "tests/pipeline/spark/test_cluster.py",
    "tests/benchmarks/test_bench_flow_instructions.py",
    "tests/pipeline/commands/test_run_tls.py",
    "tests/benchmarks/test_bench_run.py",
    "tests/pipeline/commands/test_run.py",
    "tests/pipeline/commands/test_sql.py",
    "tests/pipeline/commands/test_run_bounded_files.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that takes the SparkSession (directly or through a fixture) needs Spark, marked or
    not: `make check`, which runs the tests needing no Spark, leaves it out. The longest files
    go first (`LONGEST_FIRST`), the rest in their order."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
    rank = {path: place for place, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.partition("::")[0], len(rank)))
