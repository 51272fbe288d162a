from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from pipeline.lake.layout import Lake
from pipeline.lake.lock import lake_lock
from pipeline.lake.orphans import cleanup_orphans, data_files
from pipeline.lake.staging import MANIFEST, stage_batch
from pipeline.lake.table_schema import SchemaMismatch
from pipeline.lake.writer import write_table_batch
from tests.pipeline.lake.conftest import (
    EVENTS_ARROW,
    event_rows,
    events_frame,
    forget_staging,
    sort_rows,
)

pytestmark = pytest.mark.spark
REPO = Path(__file__).resolve().parents[3]


def write(spark, lake: Lake, rows: list[dict], batch_id: str, schema):
    return write_table_batch(
        events_frame(spark, rows, schema),
        lake,
        "events",
        schema=schema,
        partition_by=["date"],
        batch_id=batch_id,
    )


def delta_rows(lake: Lake) -> list[dict]:
    return sort_rows(DeltaTable(lake.table_path("events")).to_pyarrow_table().to_pylist())


def test_written_batch_is_a_delta_table_with_the_rows(
    spark, lake: Lake, events_spark_schema
) -> None:
    rows = event_rows(1)
    result = write(spark, lake, rows, "batch-1", events_spark_schema)
    assert (result.version, result.rows, result.skipped, result.engine) == (0, 6, False, "delta-rs")
    assert result.files == 2  # one per date: the batch crosses midnight
    assert delta_rows(lake) == sort_rows(rows)
    delta = DeltaTable(lake.table_path("events"))
    assert delta.metadata().partition_columns == ["date"]
    assert delta.schema().to_arrow() is not None
    assert [f.name for f in delta.schema().fields] == EVENTS_ARROW.names


def test_log_add_actions_carry_partition_values_and_stats(
    spark, lake: Lake, events_spark_schema
) -> None:
    write(spark, lake, event_rows(1), "batch-1", events_spark_schema)
    log = lake.table_path("events") / "_delta_log" / "00000000000000000000.json"
    adds = [json.loads(line)["add"] for line in log.read_text().splitlines() if '"add"' in line[:8]]
    by_date = {a["partitionValues"]["date"]: json.loads(a["stats"]) for a in adds}
    assert sorted(by_date) == ["2026-11-21", "2026-11-22"]
    first_day = by_date["2026-11-21"]
    assert first_day["numRecords"] == 3
    assert first_day["minValues"]["ts"] == "2026-11-21T23:59:59.997Z"
    assert first_day["maxValues"]["ts"] == "2026-11-22T00:00:00.000Z"  # rounded up from .999008
    assert first_day["minValues"]["body"] == "b0" and "body" not in first_day["maxValues"]
    second_day = by_date["2026-11-22"]
    assert second_day["numRecords"] == 3
    assert second_day["nullCount"]["body"] == 1
    assert (second_day["minValues"]["seq"], second_day["maxValues"]["seq"]) == (103, 105)
    assert all(a["path"].startswith("date=") and a["dataChange"] for a in adds)


def test_same_batch_again_changes_nothing(spark, lake: Lake, events_spark_schema) -> None:
    first = write(spark, lake, event_rows(1), "batch-1", events_spark_schema)
    files = set(data_files(lake.table_path("events")))
    again = write(spark, lake, event_rows(1), "batch-1", events_spark_schema)
    assert again.skipped and again.version == first.version and again.rows == 0
    assert DeltaTable(lake.table_path("events")).version() == first.version
    assert set(data_files(lake.table_path("events"))) == files
    assert len(delta_rows(lake)) == 6


def test_next_batch_appends(spark, lake: Lake, events_spark_schema) -> None:
    write(spark, lake, event_rows(1), "batch-1", events_spark_schema)
    second = write(spark, lake, event_rows(2), "batch-2", events_spark_schema)
    assert second.version == 1 and second.rows == 6
    assert delta_rows(lake) == sort_rows(event_rows(1) + event_rows(2))


def test_kill_between_parquet_and_commit_leaves_nothing_visible(
    spark, lake: Lake, events_spark_schema
) -> None:
    write(spark, lake, event_rows(1), "batch-1", events_spark_schema)
    table_path = lake.table_path("events")
    before = DeltaTable(table_path).version()
    staged = stage_batch(
        events_frame(spark, event_rows(2), events_spark_schema),
        lake,
        "events",
        schema=events_spark_schema,
        partition_by=["date"],
        batch_id="batch-2",
    )
    # The "killed" run stops here: files are in the partition folders, nothing committed.
    assert all((table_path / f.path).exists() for f in staged.files)
    assert DeltaTable(table_path).version() == before
    assert delta_rows(lake) == sort_rows(event_rows(1))
    staged_paths = [table_path / f.path for f in staged.files]
    forget_staging()  # that process is gone
    with lake_lock(lake):
        assert cleanup_orphans(lake, "events") == len(staged.files) + 1  # + the staging folder
        rerun = write(spark, lake, event_rows(2), "batch-2", events_spark_schema)
    assert not any(p.exists() for p in staged_paths)
    assert not any((table_path / "_staging").iterdir())
    assert rerun.version == before + 1 and not rerun.skipped
    assert delta_rows(lake) == sort_rows(event_rows(1) + event_rows(2))


COMMIT_IN_CHILD = (
    "import json, sys\n"
    "from pipeline.lake.layout import Lake\n"
    "from pipeline.lake.lock import lake_lock\n"
    "from pipeline.lake.staging import StagedBatch\n"
    "from pipeline.lake.writer import commit_staged\n"
    "staged = StagedBatch.from_dict(json.load(open(sys.argv[2])))\n"
    "with lake_lock(Lake(sys.argv[1]), wait=60):\n"
    "    print('committing', flush=True)\n"
    "    commit_staged(staged)\n"
    "print('done', flush=True)\n"
)


def run_child(lake: Lake, manifest: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", COMMIT_IN_CHILD, str(lake.root), str(manifest)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("delay", [0.0, 0.004, 0.02, None])
def test_sigkill_during_commit_then_rerun_counts_the_batch_once(
    spark, lake: Lake, events_spark_schema, delay: float | None
) -> None:
    write(spark, lake, event_rows(1), "batch-1", events_spark_schema)
    staged = stage_batch(
        events_frame(spark, event_rows(2), events_spark_schema),
        lake,
        "events",
        schema=events_spark_schema,
        partition_by=["date"],
        batch_id="batch-2",
    )
    forget_staging()  # the child process owns the batch from here on
    child = run_child(lake, staged.staging_dir / MANIFEST)
    assert child.stdout is not None and child.stdout.readline().strip() == "committing"
    if delay is None:  # the commit runs to its end: the rerun must see it done
        child.wait(timeout=60)
    else:
        time.sleep(delay)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    print("committed before the kill:", DeltaTable(lake.table_path("events")).version() == 1)
    with lake_lock(lake, wait=10):
        cleanup_orphans(lake, "events")
        write(spark, lake, event_rows(2), "batch-2", events_spark_schema)
        write(spark, lake, event_rows(2), "batch-2", events_spark_schema)
    assert delta_rows(lake) == sort_rows(event_rows(1) + event_rows(2))
    table_path = lake.table_path("events")
    live = {f"{table_path}/{p}" for p in DeltaTable(table_path).file_uris()} | set(
        DeltaTable(table_path).file_uris()
    )
    assert {str(p) for p in data_files(table_path)} <= live
    assert not any((table_path / "_staging").iterdir())


def test_two_runs_at_once_both_land_one_after_the_other(
    spark, lake: Lake, events_spark_schema
) -> None:
    write(spark, lake, event_rows(1), "batch-1", events_spark_schema)
    manifests = []
    for batch in (2, 3):
        staged = stage_batch(
            events_frame(spark, event_rows(batch), events_spark_schema),
            lake,
            "events",
            schema=events_spark_schema,
            partition_by=["date"],
            batch_id=f"batch-{batch}",
        )
        manifests.append(staged.staging_dir / MANIFEST)
    forget_staging()
    children = [run_child(lake, m) for m in manifests]
    outputs = [c.communicate(timeout=120)[0] for c in children]
    assert all(o.split() == ["committing", "done"] for o in outputs)
    assert DeltaTable(lake.table_path("events")).version() == 2
    assert delta_rows(lake) == sort_rows(event_rows(1) + event_rows(2) + event_rows(3))


def test_empty_batch_creates_the_table_or_leaves_it(spark, lake: Lake, events_spark_schema) -> None:
    first = write(spark, lake, [], "batch-1", events_spark_schema)
    assert (first.version, first.files, first.rows) == (0, 0, 0)
    assert DeltaTable(lake.table_path("events")).count() == 0
    write(spark, lake, event_rows(1), "batch-2", events_spark_schema)
    empty = write(spark, lake, [], "batch-3", events_spark_schema)
    assert empty.version == 1 and empty.files == 0


def test_schema_that_does_not_fit_is_refused_and_leaves_nothing(
    spark, lake: Lake, events_spark_schema
) -> None:
    from pyspark.sql.types import StringType, StructField, StructType

    write(spark, lake, event_rows(1), "batch-1", events_spark_schema)
    retyped = StructType(
        [
            StructField("seq", StringType()) if f.name == "seq" else f
            for f in events_spark_schema.fields
        ]
    )
    files = set(data_files(lake.table_path("events")))
    with pytest.raises(SchemaMismatch, match="'seq'"):
        write(spark, lake, event_rows(2), "batch-2", retyped)
    assert set(data_files(lake.table_path("events"))) == files
    assert DeltaTable(lake.table_path("events")).version() == 0


def test_files_are_private(spark, lake: Lake, events_spark_schema) -> None:
    write(spark, lake, event_rows(1), "batch-1", events_spark_schema)
    for entry in lake.table_path("events").rglob("*"):
        assert entry.stat().st_mode & 0o007 == 0, entry


def test_other_engines_read_the_table(spark, lake: Lake, events_spark_schema) -> None:
    write(spark, lake, event_rows(1), "batch-1", events_spark_schema)
    write(spark, lake, event_rows(2), "batch-2", events_spark_schema)
    expected = sort_rows(event_rows(1) + event_rows(2))
    path = str(lake.table_path("events"))

    polars = pytest.importorskip("polars")
    assert sort_rows(polars.read_delta(path).to_dicts()) == expected

    duckdb = pytest.importorskip("duckdb")
    extension = pytest.importorskip("duckdb_extension_delta")
    binary = next(Path(extension.__file__).parent.rglob("delta.duckdb_extension"))
    connection = duckdb.connect(config={"autoinstall_known_extensions": False})
    connection.execute(f"LOAD '{binary}'")
    cursor = connection.execute(f"SELECT ts, session, seq, body, date FROM delta_scan('{path}')")
    names = [c[0] for c in cursor.description]
    assert sort_rows([dict(zip(names, row, strict=True)) for row in cursor.fetchall()]) == expected
