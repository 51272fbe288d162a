"""The ingestion DAG under the real Airflow (own venv, SQLite) driving the real pipeline CLI, its
Great Expectations gate on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deltalake import DeltaTable
from stomp_lake_dags.assets import CommitReport

import schemas
from tests.dags.airflow_runner import probe
from tests.dags.conftest import IngestedInterval


def lake_snapshot(lake: Path) -> dict[str, tuple[int, int]]:
    """table -> (version, rows), the ledger included."""
    snapshot = {}
    for path in [*sorted((lake / "tables").iterdir()), lake / "_ledger"]:
        if (path / "_delta_log").is_dir():
            table = DeltaTable(str(path))
            snapshot[path.name] = (table.version(), table.to_pyarrow_table().num_rows)
    return snapshot


def test_dag_files_load_with_no_import_errors_and_no_heavy_imports(dag_report: dict) -> None:
    assert dag_report["import_errors"] == {}
    assert dag_report["files"] == ["stomp_lake_ingest.py", "stomp_lake_maintenance.py"]
    assert set(dag_report["dags"]) == {"stomp_lake_ingest", "stomp_lake_maintenance"}
    assert dag_report["heavy_modules"] == []


def test_schedule_tags_retries_and_outlets(dag_report: dict) -> None:
    dag = dag_report["dags"]["stomp_lake_ingest"]
    assert dag["timetable"] == "CronDataIntervalTimetable"
    assert dag["expression"] == "0 * * * *"
    assert dag["tags"] == ["ingest", "stomp-lake"]
    assert (dag["catchup"], dag["max_active_runs"]) == (False, 1)
    tasks = dag["tasks"]
    assert {name: t["upstream"] for name, t in tasks.items()} == {
        "find_captures": [],
        "ingest": ["find_captures"],
        "publish": ["ingest"],
    }
    assert all(t["retries"] == 3 and t["exponential_backoff"] for t in tasks.values())
    assert tasks["publish"]["outlets"] == ["AssetAlias:stomp_lake.tables"]


def test_schedule_is_configurable(airflow_venv: Path, airflow_home: Path) -> None:
    env = {"STOMP_LAKE_INGEST_SCHEDULE": "*/15 * * * *", "STOMP_LAKE_TASK_RETRIES": "1"}
    dag = probe(airflow_venv, airflow_home, ["report"], env)["dags"]["stomp_lake_ingest"]
    assert dag["expression"] == "*/15 * * * *"
    assert {t["retries"] for t in dag["tasks"].values()} == {1}


@pytest.mark.slow
@pytest.mark.spark
def test_interval_run_validates_builds_the_tables_and_marks_them_updated(
    ingested_interval: IngestedInterval,
) -> None:
    run, lake = ingested_interval.result, ingested_interval.lake
    log = run["log_tail"]

    assert run["state"] == "success", log
    assert run["data_interval"] == ["2026-11-20 09:00:00+00:00", "2026-11-20 10:00:00+00:00"]
    assert set(run["tasks"].values()) == {"success"}
    assert "Spark master local[2] from the Airflow Connection stomp_lake_spark" in log
    assert "--master 'local[2]'" in log
    assert "stage 3/4: validating" in log and "not validated" not in log
    assert "--no-validate" not in log
    snapshot = lake_snapshot(lake)
    assert snapshot["_ledger"][1] == 4
    assert all(snapshot[t][1] > 0 for t in ("sessions", "frames", "messages", "heartbeats"))
    (batch,) = DeltaTable(str(lake / "_ledger")).to_pyarrow_table()["batch_id"].unique().to_pylist()
    assert batch.startswith("ivl-20261120T0900-")
    assert committed(run["xcoms"]["ingest"]) == CommitReport(
        batches=(batch,), tables=tuple(sorted(schemas.TABLES)), files=4
    )
    assert set(run["asset_events"]) == {f"stomp_lake.{table}" for table in schemas.TABLES}
    assert run["event_sources"] == ["publish"]
    for extra in run["event_extras"]:
        assert extra == {"batches": [batch], "data_interval": run["data_interval"]}


def committed(xcom: str | dict) -> CommitReport:
    """The ingest task's report (the probe may hand back the JSON it holds already decoded)."""
    return CommitReport.from_line(xcom if isinstance(xcom, str) else json.dumps(xcom))


@pytest.mark.slow
@pytest.mark.spark
def test_rerun_of_the_interval_adds_no_row_and_no_asset_event(
    ingested_interval: IngestedInterval,
) -> None:
    again = ingested_interval.rerun

    assert again["state"] == "success", again["log_tail"]
    assert again["tasks"] == {"find_captures": "success", "ingest": "success", "publish": "skipped"}
    assert "no new capture files" in again["log_tail"]
    assert "no Asset events: this run committed no batch" in again["log_tail"]
    assert not committed(again["xcoms"]["ingest"]).changed
    assert again["asset_events"] == []
    # no commit at all since the first run's (each table and the ledger at its first version)
    snapshot = lake_snapshot(ingested_interval.lake)
    assert {version for version, _ in snapshot.values()} == {0}
    assert snapshot["_ledger"][1] == 4


@pytest.mark.slow
@pytest.mark.spark  # shares the Airflow process of the Spark runs
def test_interval_without_captures_is_skipped(ingested_interval: IngestedInterval) -> None:
    result = ingested_interval.empty
    assert set(result["tasks"].values()) == {"skipped"}
    assert "nothing to ingest: no capture files closed in" in result["log_tail"]
    assert result["asset_events"] == []
    assert not ingested_interval.empty_lake.exists()


@pytest.mark.slow
@pytest.mark.spark
def test_missing_configuration_fails_with_a_clear_message(
    ingested_interval: IngestedInterval,
) -> None:
    result = ingested_interval.unconfigured
    assert result["state"] == "failed"
    assert result["tasks"]["find_captures"] == "failed"
    assert result["tries"]["find_captures"] == 1
    assert "STOMP_LAKE_CAPTURE_DIR" in result["log_tail"]
