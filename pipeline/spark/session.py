"""One place that knows how to start a SparkSession that works on this stack.

Pitfalls met on this stack: workers start the system Python unless told otherwise, Spark binds a
non-loopback address, ivy writes into $HOME, and Parquet timestamps default to INT96.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"


def _work_dir() -> Path:
    return Path(os.environ.get("STOMP_LAKE_WORK", Path.cwd() / "work")).resolve()


def base_conf(master: str) -> dict[str, str]:
    work = _work_dir()
    conf = {
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.jars.ivy": str(work / "ivy"),
        "spark.local.dir": str(work / "spark-tmp"),
        "spark.sql.warehouse.dir": str(work / "spark-warehouse"),
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": "2g",
        "spark.sql.shuffle.partitions": "8",
        "spark.python.worker.reuse": "true",
    }
    if master.startswith("local"):
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    return conf


def build_spark(
    master: str = DEFAULT_MASTER,
    app_name: str = "stomp-lake",
    extra_conf: Mapping[str, str] | None = None,
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

    conf = base_conf(master)
    conf.update(extra_conf or {})
    Path(conf["spark.local.dir"]).mkdir(parents=True, exist_ok=True)
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
