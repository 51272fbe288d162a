"""Daily upkeep of the stomp-lake lake.

1. `expire_connection_state`: when no batch has moved the carried state of open connections for
   `state_expiry_days`, those connections are long dead: a `stomp-lake run` over no files closes
   them ('capture_end'); `publish` then emits an Asset event for each table that batch reached
   (skipped when nothing was closed).
2. `compact`: merge the small files of every table (and the ledger), `compact_target_mb` each.
3. `vacuum`: delete files no table version younger than `vacuum_retention_hours` uses, and the
   carried-state folders of earlier batches.
4. `retain_captures`: raw capture files older than `capture_retention_days` are deleted or moved
   to `capture_archive_dir` (setting `capture_retention`: keep | delete | move; default keep),
   only once the ledger holds them.

Every step runs `stomp-lake maintain` under the lake lock (waiting up to `wait_lock_seconds` for an
ingestion run), refuses a damaged lake as `stomp-lake run` does, and is idempotent.
Schedule: `STOMP_LAKE_MAINTENANCE_SCHEDULE` (default @daily). Settings: see dags/README.md.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import AssetAlias, CronDataIntervalTimetable, chain, dag, task

# The helper package sits beside this file; Airflow puts the DAG folder on sys.path only in
# some entry points (dag processor, workers), not in a bare DagBag or `dag.test()`.
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

from stomp_lake_dags.assets import TABLES_ALIAS
from stomp_lake_dags.settings import retries_from_env, retry_delay_from_env, schedule_from_env

TABLES = AssetAlias(name=TABLES_ALIAS)

DEFAULT_ARGS: dict[str, Any] = {
    "retries": retries_from_env(2),
    "retry_delay": timedelta(seconds=retry_delay_from_env(300)),
    "retry_exponential_backoff": True,
    "max_retry_delay": timedelta(hours=1),
}


@dag(
    dag_id="stomp_lake_maintenance",
    schedule=CronDataIntervalTimetable(
        schedule_from_env("maintenance_schedule", "@daily"), timezone="UTC"
    ),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    tags=["stomp-lake", "maintenance"],
    doc_md=__doc__,
)
def stomp_lake_maintenance() -> None:
    @task.bash
    def expire_connection_state(data_interval_start: datetime | None = None) -> str:
        from stomp_lake_dags import commands
        from stomp_lake_dags.airflow_settings import current_settings
        from stomp_lake_dags.captures import interval_batch_id

        assert data_interval_start is not None
        batch_id = interval_batch_id("expire", data_interval_start, datetime.now(UTC))
        return commands.expire_state(current_settings(), batch_id)

    @task(outlets=[TABLES])
    def publish(report: str, outlet_events: Any = None) -> list[str]:
        from stomp_lake_dags.assets import CommitReport, publish_tables

        nothing = "no carried connection state was old enough to expire; the tables are unchanged"
        extra = {"reason": "expired connection state"}
        return publish_tables(CommitReport.from_line(report), outlet_events, TABLES, extra, nothing)

    @task.bash
    def compact() -> str:
        from stomp_lake_dags import commands
        from stomp_lake_dags.airflow_settings import current_settings

        return commands.compact(current_settings())

    @task.bash
    def vacuum() -> str:
        from stomp_lake_dags import commands
        from stomp_lake_dags.airflow_settings import current_settings

        return commands.vacuum(current_settings())

    @task.bash
    def retain_captures() -> str:
        from stomp_lake_dags import commands
        from stomp_lake_dags.airflow_settings import current_settings

        return commands.retain_captures(current_settings())

    expired = expire_connection_state()
    publish(expired)
    chain(expired, compact(), vacuum(), retain_captures())


stomp_lake_maintenance()
