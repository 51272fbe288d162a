"""The runner's checks of its inputs, made before the lake is touched or Spark starts."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from pipeline.runner import InputError, RunConfig, check_inputs, sniff_captures
from pipeline.spark.session import SparkSettings
from tests.support.paths import SAMPLES
from tests.support.scripts import run_script

SAMPLE = sorted(SAMPLES.glob("*.pcap*"))[0]


def test_captures_are_told_from_other_files_by_magic_number(tmp_path: Path) -> None:
    notes, packed, empty = tmp_path / "notes.pcap", tmp_path / "old.pcap", tmp_path / "new.pcap"
    notes.write_text("# notes\n")
    packed.write_bytes(gzip.compress(SAMPLE.read_bytes()[:100]))
    empty.write_bytes(b"")
    captures, others = sniff_captures([str(SAMPLE), str(notes), str(packed), str(empty)])
    assert captures == [str(SAMPLE)]
    assert others == {
        str(notes): "magic 23206e6f is neither pcap nor pcapng",
        str(packed): "gzip-compressed file, not pcap/pcapng",
        str(empty): "0 bytes, too short for a capture",
    }


def test_missing_inputs_and_inputs_without_captures_are_refused(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    with pytest.raises(InputError, match="no such file or directory: .*absent") as refused:
        check_inputs(RunConfig(inputs=[SAMPLE, tmp_path / "absent"], lake=lake))
    assert refused.value.exit_code == 2
    with pytest.raises(InputError, match="no capture files"):
        check_inputs(RunConfig(inputs=[tmp_path], lake=lake))
    # Closing carried connections needs no capture file (the maintenance DAG's expire-state).
    assert check_inputs(RunConfig(inputs=[tmp_path], lake=lake, close_open=True)) == ([], {})
    notes = tmp_path / "notes.cap"
    notes.write_text("text")
    captures, others = check_inputs(RunConfig(inputs=[tmp_path, SAMPLE], lake=lake))
    assert captures == [str(SAMPLE.resolve())] and list(others) == [str(notes.resolve())]
    assert not lake.exists()


def test_partial_captures_left_untouched_are_reported(tmp_path: Path) -> None:
    import os
    import time

    from pipeline.runner import PARTIAL_GRACE_SECONDS, stale_partials

    folder = tmp_path / "captures"
    (folder / "sub").mkdir(parents=True)
    crashed = folder / "sub" / "broker-1.pcapng.partial"
    writing = folder / "broker-2.pcapng.partial"
    for path in (crashed, writing):
        path.write_bytes(b"\x0a\x0d\x0d\x0a")
    old = time.time() - PARTIAL_GRACE_SECONDS - 60
    os.utime(crashed, (old, old))
    assert stale_partials([folder]) == [str(crashed.resolve())]
    assert stale_partials([crashed]) == [str(crashed.resolve())]
    later = time.time() + 2 * PARTIAL_GRACE_SECONDS  # nothing written since: both are stale
    assert sorted(stale_partials([folder], now=later)) == sorted(
        str(p.resolve()) for p in (writing, crashed)
    )


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
