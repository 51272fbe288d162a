"""Ingest the capture files closed in each data interval into the stomp-lake tables.

1. `find_captures`: the capture files last modified inside the data interval (ingest mode
   `pending`: every capture file; the pipeline's ledger skips those already ingested).
2. `ingest`: `stomp-lake run` on them (its Great Expectations gate validates the batch before
   anything is committed), then `stomp-lake maintain check`: the ledger must hold every file,
   else the task fails and its retry runs `stomp-lake run` again; its last line reports which
   batches committed the files since they were listed, and the tables those batches reached
   (XCom).
3. `publish`: an Asset event (`stomp_lake.<table>`, through the alias `stomp_lake.tables`) for
   each of those tables; skipped, with no event, when this run committed nothing.

Re-running or backfilling an interval adds no row (its files are in the ledger) and no Asset
event. Schedule: `STOMP_LAKE_INGEST_SCHEDULE` (default @hourly). Settings: see dags/README.md.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import AssetAlias, CronDataIntervalTimetable, dag, task

# The helper package sits beside this file; Airflow puts the DAG folder on sys.path only in
# some entry points (dag processor, workers), not in a bare DagBag or `dag.test()`.
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

from stomp_lake_dags.assets import TABLES_ALIAS
from stomp_lake_dags.settings import retries_from_env, retry_delay_from_env, schedule_from_env

TABLES = AssetAlias(name=TABLES_ALIAS)

DEFAULT_ARGS: dict[str, Any] = {
    "retries": retries_from_env(3),
    "retry_delay": timedelta(seconds=retry_delay_from_env(60)),
    "retry_exponential_backoff": True,
    "max_retry_delay": timedelta(minutes=30),
}


@dag(
    dag_id="stomp_lake_ingest",
    # An explicit data-interval timetable: a plain cron string gives runs with no interval in
    # Airflow 3 (CronTriggerTimetable), and the interval is what selects the capture files.
    schedule=CronDataIntervalTimetable(schedule_from_env("ingest_schedule", "@hourly"), "UTC"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    tags=["stomp-lake", "ingest"],
    doc_md=__doc__,
)
def stomp_lake_ingest() -> None:
    @task
    def find_captures(
        data_interval_start: datetime | None = None, data_interval_end: datetime | None = None
    ) -> dict[str, Any]:
        from airflow.sdk.exceptions import AirflowSkipException
        from stomp_lake_dags.airflow_settings import current_settings
        from stomp_lake_dags.captures import capture_files, closed_between

        assert data_interval_start is not None and data_interval_end is not None
        settings = current_settings()
        listed_at = datetime.now(UTC)
        if not settings.capture_dir.is_dir():
            raise FileNotFoundError(f"capture folder {settings.capture_dir} does not exist")
        if settings.ingest_mode == "pending":
            files = capture_files(settings.capture_dir)
            scope = f"capture files under {settings.capture_dir}"
        else:
            files = closed_between(settings.capture_dir, data_interval_start, data_interval_end)
            scope = (
                f"capture files closed in [{data_interval_start}, {data_interval_end}) "
                f"under {settings.capture_dir}"
            )
        if not files:
            raise AirflowSkipException(f"nothing to ingest: no {scope}")
        print(f"{len(files)} {scope}")
        return {"files": [str(f) for f in files], "listed_at": listed_at.isoformat()}

    @task.bash
    def ingest(found: dict[str, Any], data_interval_start: datetime | None = None) -> str:
        from stomp_lake_dags import commands
        from stomp_lake_dags.airflow_settings import current_settings
        from stomp_lake_dags.captures import interval_batch_id
        from stomp_lake_dags.settings import take_failpoint

        assert data_interval_start is not None
        settings = current_settings()
        batch_id = interval_batch_id("ivl", data_interval_start, datetime.now(UTC))
        kill_at = take_failpoint(settings)
        if kill_at:
            print(f"failpoint {kill_at}: this attempt's stomp-lake run will be killed there")
        files, listed_at = found["files"], found["listed_at"]
        return commands.ingest(settings, files, batch_id, listed_at, kill_at)

    @task(outlets=[TABLES])
    def publish(
        report: str,
        outlet_events: Any = None,
        data_interval_start: datetime | None = None,
        data_interval_end: datetime | None = None,
    ) -> list[str]:
        from stomp_lake_dags.assets import CommitReport, publish_tables

        committed = CommitReport.from_line(report)
        interval = {"data_interval": [str(data_interval_start), str(data_interval_end)]}
        nothing = (
            f"this run committed no batch: the {committed.files} capture files of the interval "
            "were ingested before it started (a re-run or backfill); the tables are unchanged"
        )
        return publish_tables(committed, outlet_events, TABLES, interval, nothing)

    publish(ingest(find_captures()))


stomp_lake_ingest()
