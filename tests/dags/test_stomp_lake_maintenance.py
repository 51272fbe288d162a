"""The maintenance DAG under the real Airflow, upkeeping a lake the ingestion DAG built: carried
connections expired by a real `stomp-lake run` (validation on), small files compacted, captures
retained."""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from stomp_lake_dags.assets import CommitReport

from pipeline.lake import Lake, Ledger
from pipeline.lake.fingerprint import fingerprint
from pipeline.lake.maintenance import carried_connections
from tests.dags.airflow_runner import probe, run_dags
from tests.dags.conftest import IngestedInterval

LOGICAL_DATE = "2026-11-21T00:00:00+00:00"  # @daily: the run covers 2026-11-20
DAY = 86_400
SMALL_FILES = "small_files"


@dataclass(frozen=True, slots=True)
class Maintained:
    lake: Path
    captures: Path
    archive: Path
    env: dict[str, str]
    carried_before: int
    sessions_before: int
    small_rows_before: list[dict]
    result: dict
    rerun: dict  # the same interval again, right after


def rows_of(path: Path) -> list[dict]:
    return sorted(DeltaTable(str(path)).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])


def committed(xcom: str | dict) -> CommitReport:
    return CommitReport.from_line(xcom if isinstance(xcom, str) else json.dumps(xcom))


def end_reasons(lake: Path) -> list[str]:
    sessions = DeltaTable(str(lake / "tables" / "sessions")).to_pyarrow_table()
    return sessions["end_reason"].to_pylist()


@pytest.fixture(scope="module")
def maintained(
    airflow_venv: Path,
    airflow_home: Path,
    ingested_interval: IngestedInterval,
    tmp_path_factory: pytest.TempPathFactory,
) -> Maintained:
    assert ingested_interval.result["state"] == "success", ingested_interval.result["log_tail"]
    root = tmp_path_factory.mktemp("maintenance")
    lake_root, captures, archive = root / "lake", root / "captures", root / "archive"
    shutil.copytree(ingested_interval.lake, lake_root)  # the ingestion tests keep theirs
    lake = Lake(lake_root)
    carried = carried_connections(lake)
    ten_days_ago = time.time() - 10 * DAY  # no batch has moved the carried state since
    os.utime(lake.state_dir / "connections" / "current.json", (ten_days_ago, ten_days_ago))

    small = lake.table_path(SMALL_FILES)  # a table of many small files
    for i in range(15):
        ids = pa.array(range(i * 7, i * 7 + 7), pa.int64())
        write_deltalake(str(small), pa.table({"id": ids, "batch": [f"b{i}"] * 7}), mode="append")

    captures.mkdir()
    old_ingested, old_waiting = captures / "old.pcap", captures / "waiting.pcap"
    old_ingested.write_bytes(b"ingested long ago")
    old_waiting.write_bytes(b"never ingested")
    forty_days_ago = time.time() - 40 * DAY
    for path in (old_ingested, old_waiting):
        os.utime(path, (forty_days_ago, forty_days_ago))
    Ledger(lake).record([fingerprint(old_ingested)], "test-retention")

    env = {
        **ingested_interval.env,
        "STOMP_LAKE_CAPTURE_DIR": str(captures),
        "STOMP_LAKE_LAKE": str(lake_root),
        "STOMP_LAKE_VACUUM_RETENTION_HOURS": "0",
        "STOMP_LAKE_CAPTURE_RETENTION": "move",
        "STOMP_LAKE_CAPTURE_RETENTION_DAYS": "30",
        "STOMP_LAKE_CAPTURE_ARCHIVE_DIR": str(archive),
    }
    before = len(end_reasons(lake_root)), rows_of(small)
    run = {"dag_id": "stomp_lake_maintenance", "logical_date": LOGICAL_DATE, "env": env}
    first, again = run_dags(airflow_venv, airflow_home, [run, run])
    return Maintained(lake_root, captures, archive, env, carried, *before, first, again)


def test_schedule_tags_and_tasks(dag_report: dict) -> None:
    dag = dag_report["dags"]["stomp_lake_maintenance"]
    assert dag["timetable"] == "CronDataIntervalTimetable"
    assert dag["expression"] == "0 0 * * *"
    assert dag["tags"] == ["maintenance", "stomp-lake"]
    assert (dag["catchup"], dag["max_active_runs"]) == (False, 1)
    assert {name: t["upstream"] for name, t in dag["tasks"].items()} == {
        "expire_connection_state": [],
        "publish": ["expire_connection_state"],
        "compact": ["expire_connection_state"],
        "vacuum": ["compact"],
        "retain_captures": ["vacuum"],
    }
    assert all(t["retries"] == 2 and t["exponential_backoff"] for t in dag["tasks"].values())
    assert dag["tasks"]["publish"]["outlets"] == ["AssetAlias:stomp_lake.tables"]


def test_schedule_is_configurable(airflow_venv: Path, airflow_home: Path) -> None:
    env = {"STOMP_LAKE_MAINTENANCE_SCHEDULE": "30 2 * * *"}
    dag = probe(airflow_venv, airflow_home, ["report"], env)["dags"]["stomp_lake_maintenance"]
    assert dag["expression"] == "30 2 * * *"


@pytest.mark.slow
@pytest.mark.spark
def test_long_carried_connections_are_closed_and_published(maintained: Maintained) -> None:
    result = maintained.result
    assert result["state"] == "success", result["log_tail"]
    assert set(result["tasks"].values()) == {"success"}
    assert maintained.carried_before >= 2  # cut at the middle of a sample, one left open

    reasons = end_reasons(maintained.lake)
    assert len(reasons) == maintained.sessions_before + maintained.carried_before
    assert reasons.count("capture_end") == maintained.carried_before
    assert carried_connections(Lake(maintained.lake)) == 0
    assert "stage 3/4: validating" in result["log_tail"]

    report = committed(result["xcoms"]["expire_connection_state"])
    (batch,) = report.batches
    assert batch.startswith("expire-20261120T0000-")
    assert "sessions" in report.tables
    assert set(result["asset_events"]) == {f"stomp_lake.{t}" for t in report.tables}
    assert all(e["reason"] == "expired connection state" for e in result["event_extras"])
    # vacuum kept only the state the next batch starts from
    state = maintained.lake / "_state" / "connections"
    assert sorted(p.name for p in state.iterdir() if p.is_dir()) == [batch]


@pytest.mark.slow
@pytest.mark.spark
def test_compaction_merges_small_files_without_changing_contents(maintained: Maintained) -> None:
    assert maintained.result["state"] == "success", maintained.result["log_tail"]
    small = maintained.lake / "tables" / SMALL_FILES
    assert len(DeltaTable(str(small)).file_uris()) == 1
    assert len(list(small.glob("*.parquet"))) == 1  # vacuumed: the 15 replaced files are gone
    assert rows_of(small) == maintained.small_rows_before


@pytest.mark.slow
@pytest.mark.spark
def test_only_old_ingested_captures_are_moved(maintained: Maintained) -> None:
    assert maintained.result["state"] == "success", maintained.result["log_tail"]
    assert (maintained.archive / "old.pcap").read_bytes() == b"ingested long ago"
    assert not (maintained.captures / "old.pcap").exists()
    assert (maintained.captures / "waiting.pcap").exists()


@pytest.mark.slow
@pytest.mark.spark
def test_rerun_expires_nothing_and_publishes_nothing(maintained: Maintained) -> None:
    again = maintained.rerun
    assert again["state"] == "success", again["log_tail"]
    assert again["tasks"]["publish"] == "skipped"
    assert again["asset_events"] == []
    assert "no carried connection state, keeping" in again["log_tail"]
    sessions = maintained.sessions_before + maintained.carried_before
    assert len(end_reasons(maintained.lake)) == sessions  # rows of the first run only
