"""The runner: Spark started early, the validation engine chosen."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.runner import RunConfig
from pipeline.spark.session import SparkSettings
from tests.support.paths import SAMPLES
from tests.support.scripts import run_script

SAMPLE = sorted(SAMPLES.glob("*.pcap*"))[0]


# A fresh process: SparkStart starts nothing early where a session already runs (the suite's).
EARLY_START = """
import json, os, sys
from pathlib import Path
from pyspark import SparkContext
from pipeline.runner import RunConfig, SparkStart

config = RunConfig(inputs=[], lake=Path(sys.argv[1]), validate=False)
seen = {}
with SparkStart(config) as unused:
    unused.begin()
    unused.wait()
    seen["unused_started"] = SparkContext._active_spark_context is not None
seen["unused_stopped"] = SparkContext._active_spark_context is None
with SparkStart(config) as used:
    used.begin()
    session = used.session()
    seen["used_is_the_early_one"] = session is used._early.result()
with SparkStart(config) as again:
    again.begin()  # a session runs: nothing starts early, the running one is used
    seen["again_started_nothing"] = again._early is None and again.session() is session
seen["used_kept"] = SparkContext._active_spark_context is not None
print(json.dumps(seen))
sys.stdout.flush()
os._exit(0)
"""


@pytest.mark.spark
def test_spark_started_early_is_used_or_stopped(tmp_path: Path) -> None:
    seen = json.loads(run_script(EARLY_START, tmp_path, str(tmp_path / "lake")))
    assert seen == {
        "unused_started": True,
        "unused_stopped": True,
        "used_is_the_early_one": True,
        "again_started_nothing": True,
        "used_kept": True,
    }


def test_tables_are_validated_on_duckdb_with_a_local_master_unless_told_otherwise() -> None:
    from pipeline.errors import UsageError
    from pipeline.runner import validates_on_duckdb

    def on(master: str, engine: str) -> bool:
        return validates_on_duckdb(
            RunConfig([], Path("lake"), spark=SparkSettings(master), validation_engine=engine)
        )

    assert on("local[*]", "auto") and on("local[2]", "auto")
    assert not on("spark://m:7077", "auto")
    assert on("spark://m:7077", "duckdb")
    assert not on("local[*]", "spark")
    with pytest.raises(UsageError, match="auto, duckdb, spark"):  # exit code 2
        on("local[*]", "pandas")
