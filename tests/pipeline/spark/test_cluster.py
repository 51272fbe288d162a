"""The main job on a Spark standalone cluster (a master and 2 one-core workers) gives the same
tables as on `local[*]`.

The cluster run is a `stomp-lake run --master spark://...` subprocess (a SparkSession is one per
process and the test session's is local); the local run shares the test session's.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import schemas
from pipeline.commands.run import RunConfig, run
from pipeline.lake import Lake, read_table
from tests.support.paths import REPO, SAMPLES
from tests.support.spark_cluster import standalone_cluster

pytestmark = [pytest.mark.spark, pytest.mark.slow]

RUN_TIMEOUT_S = 600


def _contents(spark, lake: Lake, table: str) -> list[tuple]:
    frame = read_table(spark, lake, table).drop("batch_id")
    return sorted(tuple(str(v) for v in row) for row in frame.collect())


@pytest.fixture(scope="module")
def cluster_lake(tmp_path_factory) -> tuple[Lake, str]:
    work = tmp_path_factory.mktemp("cluster")
    lake = Lake(work / "lake")
    with standalone_cluster(work, workers=2) as cluster:
        command = [
            sys.executable, "-m", "pipeline.cli", "run", "--input", str(SAMPLES),
            "--lake", str(lake.root), "--master", cluster.url,
            "--open-connections", "close", "--no-validate",
        ]
        done = subprocess.run(
            command, cwd=REPO, env=cluster.env, capture_output=True, text=True,
            timeout=RUN_TIMEOUT_S,
        )
        assert done.returncode == 0, f"{done.stderr[-4000:]}\n{cluster.log_tail()}"
        # One snapshot: the driver's JVM may still be ending the application (it ends after the
        # command has returned), which moves it from the active apps to the completed ones.
        status = cluster.status()
        apps = status.get("completedapps", []) + status.get("activeapps", [])
    return lake, str(apps)


@pytest.fixture(scope="module")
def local_lake(spark, tmp_path_factory) -> Lake:
    root = tmp_path_factory.mktemp("local-lake")
    run(
        RunConfig(inputs=[SAMPLES], lake=root, close_open=True, validate=False),
        progress=lambda _: None,
    )
    return Lake(root)


def test_the_job_ran_on_the_cluster(cluster_lake) -> None:
    _lake, apps = cluster_lake
    assert "stomp-lake" in apps  # the master saw our application, so executors did the work


@pytest.mark.parametrize("table", schemas.TABLES)
def test_cluster_tables_equal_local_tables(spark, cluster_lake, local_lake, table) -> None:
    lake, _apps = cluster_lake
    cluster_rows = _contents(spark, lake, table)
    assert cluster_rows == _contents(spark, local_lake, table)
    if table in ("sessions", "frames", "messages", "heartbeats"):
        assert cluster_rows, f"{table} is empty: the comparison would prove nothing"


def test_cluster_run_recorded_the_same_files(cluster_lake, local_lake) -> None:
    from pipeline.lake import Ledger

    lake, _apps = cluster_lake

    def names(target: Lake) -> list[str]:
        paths = Ledger(target).entries().column("path").to_pylist()
        return sorted(Path(path).name for path in paths)

    assert names(lake) == names(local_lake) == sorted(p.name for p in SAMPLES.glob("*.pcap*"))
