"""Both DAGs under a real Airflow 3.3: scheduler, dag-processor and api-server on loopback,
LocalExecutor, SQLite (Airflow 3 runs LocalExecutor on SQLite; no PostgreSQL needed).

The ingestion DAG runs on one-minute data intervals. Capture files are closed (mtime) in the
intervals before the DAG is unpaused; one more arrives after the first run listed its files,
closed in the second interval. Each run must ingest exactly the files closed in its own interval
(older intervals are never run: catchup is off), its Asset events must name exactly the tables
its batch committed, the second run's ingestion is killed once mid-commit (the DAG's failpoint
file) and its retry resumes the batch and succeeds, and the maintenance DAG then runs on its own
schedule. Bounded: every wait has a deadline, the whole test a few minutes.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.dags.airflow_runner import _log_lines, airflow_env, run_airflow
from tests.dags.conftest import SAMPLES

pytestmark = [pytest.mark.spark, pytest.mark.slow]

INGEST, MAINTENANCE = "stomp_lake_ingest", "stomp_lake_maintenance"
EVERY_MINUTE = "* * * * *"
INTERVAL = timedelta(minutes=1)
FAILPOINT = "lake.committed"  # killed after the first table's commit: the retry must resume
START_TIMEOUT_S = 120
RUN_TIMEOUT_S = 240
# Closed in the intervals before the unpause, newest last; the last is the first run's.
SEEDED = (
    "activemq-queues-acks.pcap",
    "rabbitmq-topics-tx.pcapng",
    "rabbitmq-heartbeat-errors.pcap",
)
ARRIVING = "activemq-heartbeat-v10.pcap"  # arrives after the first run listed its files

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Run:
    run_id: str
    run_type: str
    state: str | None
    start: datetime
    end: datetime


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for(what: str, check: Callable[[], T | None], timeout: float, logs: Path) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}\n{diagnostics(logs)}")


def diagnostics(home: Path) -> str:
    parts = []
    for name in ("scheduler", "dag-processor", "api-server"):
        log = home / f"{name}.out"
        if log.exists():
            parts.append(f"--- {name} (tail)\n{log.read_text(errors='replace')[-3000:]}")
    task_logs = sorted((home / "logs").rglob("*.log")) if (home / "logs").is_dir() else []
    for log in task_logs[-8:]:
        parts.append(f"--- {log.relative_to(home)}\n{_log_lines(log.read_text(errors='replace'))}")
    return "\n".join(parts)[-20000:]


class Metadata:
    """Read-only queries on the Airflow metadata database (SQLite) while Airflow runs."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        uri = f"file:{self.path}?mode=ro"
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=30)) as db:
            return db.execute(sql, params).fetchall()

    def dags(self) -> set[str]:
        return {row[0] for row in self.rows("SELECT dag_id FROM dag WHERE is_stale = 0")}

    def runs(self, dag_id: str) -> list[Run]:
        rows = self.rows(
            "SELECT run_id, run_type, state, data_interval_start, data_interval_end FROM dag_run "
            "WHERE dag_id = ? ORDER BY data_interval_start",
            dag_id,
        )
        return [Run(r[0], r[1], r[2], _utc(r[3]), _utc(r[4])) for r in rows]

    def task_state(self, dag_id: str, run_id: str, task_id: str) -> tuple[str | None, int]:
        found = self.rows(
            "SELECT state, try_number FROM task_instance WHERE dag_id = ? AND run_id = ? "
            "AND task_id = ?",
            dag_id, run_id, task_id,
        )  # fmt: skip
        return (found[0][0], int(found[0][1])) if found else (None, 0)

    def earlier_tries(self, dag_id: str, run_id: str, task_id: str) -> list[tuple[int, str]]:
        return [
            (int(r[0]), r[1])
            for r in self.rows(
                "SELECT try_number, state FROM task_instance_history WHERE dag_id = ? "
                "AND run_id = ? AND task_id = ? ORDER BY try_number",
                dag_id,
                run_id,
                task_id,
            )  # fmt: skip
        ]

    def asset_events(self) -> list[tuple[str, str, str]]:
        """(asset name, source DAG, source run) of every Asset event."""
        return self.rows(
            "SELECT a.name, e.source_dag_id, e.source_run_id FROM asset_event e "
            "JOIN asset a ON a.id = e.asset_id"
        )


def _utc(value: Any) -> datetime:
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


@contextlib.contextmanager
def airflow_components(venv: Path, home: Path, env: dict[str, str]) -> Iterator[None]:
    """scheduler, dag-processor and api-server, each in its own process group, stopped (SIGTERM,
    then SIGKILL) at the end."""
    airflow = str(venv / "bin" / "airflow")
    port = env["STOMP_LAKE_TEST_API_PORT"]
    commands = {
        "api-server": [airflow, "api-server", "--host", "127.0.0.1", "--port", port],
        "scheduler": [airflow, "scheduler"],
        "dag-processor": [airflow, "dag-processor"],
    }
    started: list[subprocess.Popen[bytes]] = []
    try:
        for name, command in commands.items():
            with (home / f"{name}.out").open("wb") as out:
                started.append(
                    subprocess.Popen(
                        command,
                        env=env,
                        cwd=home,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )  # fmt: skip
                )
        yield
    finally:
        for process in started:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in started:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


def api_healthy(port: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/monitor/health", timeout=5):
            return True
    except OSError:
        return False


def place(capture: Path, closed_at: datetime) -> Path:
    """A capture file closed (mtime) at `closed_at`, written under a hidden name and renamed, as
    a rotating recorder does."""
    hidden = capture.with_name(f".{capture.name}.partial")
    shutil.copy(SAMPLES / capture.name, hidden)
    stamp = closed_at.timestamp()
    os.utime(hidden, (stamp, stamp))
    hidden.rename(capture)
    return capture.resolve()


def test_dags_under_a_real_scheduler(airflow_venv: Path, tmp_path: Path) -> None:
    home, captures, lake = tmp_path / "airflow", tmp_path / "captures", tmp_path / "lake"
    home.mkdir()
    captures.mkdir()
    failpoint_file = tmp_path / "failpoint"
    port = str(free_port())
    extra = {
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "2",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__API__SECRET_KEY": secrets.token_hex(16),
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
        "STOMP_LAKE_TEST_API_PORT": port,
        "STOMP_LAKE_CAPTURE_DIR": str(captures),
        "STOMP_LAKE_LAKE": str(lake),
        "STOMP_LAKE_SPARK_MASTER": "local[2]",
        "STOMP_LAKE_INGEST_SCHEDULE": EVERY_MINUTE,
        "STOMP_LAKE_MAINTENANCE_SCHEDULE": EVERY_MINUTE,
        "STOMP_LAKE_TASK_RETRIES": "2",
        "STOMP_LAKE_TASK_RETRY_DELAY_SECONDS": "2",
        "STOMP_LAKE_FAILPOINT_FILE": str(failpoint_file),
        "STOMP_LAKE_WAIT_LOCK_SECONDS": "300",
    }
    env = airflow_env(home, extra)
    run_airflow(airflow_venv, home, [str(airflow_venv / "bin" / "airflow"), "db", "migrate"], extra)
    metadata = Metadata(home / "airflow.db")
    started = time.monotonic()

    with airflow_components(airflow_venv, home, env):
        wait_for("the api-server", lambda: api_healthy(port), START_TIMEOUT_S, home)
        wait_for("both DAGs parsed", lambda: {INGEST, MAINTENANCE} <= metadata.dags(), 120, home)
        # Unpause early in a minute, so the first run is for the interval that just ended.
        second = datetime.now(UTC).second
        if second > 30:
            time.sleep(62 - second)
        minute = datetime.now(UTC).replace(second=0, microsecond=0)
        closed: dict[Path, datetime] = {}
        for age, name in zip(range(len(SEEDED), 0, -1), SEEDED, strict=True):
            at = minute - age * INTERVAL + timedelta(seconds=30)
            closed[place(captures / name, at)] = at
        unpause(airflow_venv, home, extra, INGEST)

        first = wait_for("the first ingestion run", lambda: _nth_run(metadata, 0), 90, home)
        wait_for(
            "the first run's find_captures to finish",
            lambda: (
                metadata.task_state(INGEST, first.run_id, "find_captures")[0]
                in ("success", "skipped", "failed")
            ),
            RUN_TIMEOUT_S,
            home,
        )
        # Arrives now, closed in the second interval: the first run has listed its files.
        arrived_at = first.end + timedelta(seconds=30)
        closed[place(captures / ARRIVING, arrived_at)] = arrived_at
        wait_for(
            "the first run's ingest to finish",
            lambda: (
                metadata.task_state(INGEST, first.run_id, "ingest")[0]
                in ("success", "failed", "upstream_failed", "skipped")
            ),
            RUN_TIMEOUT_S,
            home,
        )
        failpoint_file.write_text(FAILPOINT)  # taken by the next ingest attempt: the second run's
        second_run = wait_for(
            "the second ingestion run to finish",
            lambda: _finished_run(metadata, 1, INGEST),
            RUN_TIMEOUT_S,
            home,
        )
        pause(airflow_venv, home, extra, INGEST)
        ingest_seconds = time.monotonic() - started

        unpause(airflow_venv, home, extra, MAINTENANCE)
        maintenance = wait_for(
            "a scheduled maintenance run to finish",
            lambda: _finished_run(metadata, 0, MAINTENANCE),
            RUN_TIMEOUT_S,
            home,
        )
        pause(airflow_venv, home, extra, MAINTENANCE)
        runs = metadata.runs(INGEST)
        events = metadata.asset_events()
        first_run = next(r for r in runs if r.run_id == first.run_id)
        ingest_tries = metadata.task_state(INGEST, second_run.run_id, "ingest")
        earlier = metadata.earlier_tries(INGEST, second_run.run_id, "ingest")
        expire = metadata.task_state(MAINTENANCE, maintenance.run_id, "expire_connection_state")
        publish_maintenance = metadata.task_state(MAINTENANCE, maintenance.run_id, "publish")
    total_seconds = time.monotonic() - started
    report = diagnostics(home)

    # Two consecutive scheduled intervals, both successful; the maintenance run on its schedule.
    assert first_run.state == "success" and second_run.state == "success", report
    assert first_run.run_type == second_run.run_type == "scheduled"
    assert second_run.start == first_run.end and first_run.end - first_run.start == INTERVAL
    assert maintenance.run_type == "scheduled" and maintenance.state == "success", report
    assert maintenance.end - maintenance.start == INTERVAL

    # The second run's ingestion: killed once at the failpoint, retried, succeeded.
    assert not failpoint_file.exists()
    assert ingest_tries == ("success", 2), (ingest_tries, earlier, report)
    assert earlier == [(1, "failed")] or earlier == [(1, "up_for_retry")], earlier

    # Each run ingested exactly the files closed in its own interval.
    batches = batches_by_interval(lake)
    for run in (first_run, second_run):
        expected = {str(p) for p, at in closed.items() if run.start <= at < run.end}
        got = batches.get(run.start, {})
        assert expected and set().union(*got.values()) == expected, (run, got, closed)
    assert len(batches) == 2, batches  # nothing from the older intervals (catchup is off)

    # Asset events: for each run, exactly the tables its batches committed; none for maintenance.
    for run in (first_run, second_run):
        changed = committed_tables(lake, sorted(batches[run.start]))
        announced = {name for name, dag, run_id in events if run_id == run.run_id}
        assert changed and announced == {f"stomp_lake.{t}" for t in changed}, (run, events)
    second_announced = {name for name, _, run_id in events if run_id == second_run.run_id}
    assert "stomp_lake.websocket_controls" not in second_announced  # no WebSocket traffic
    assert not [e for e in events if e[1] == MAINTENANCE], events
    assert expire[0] == "success" and publish_maintenance[0] == "skipped"
    print(f"ingestion runs {ingest_seconds:.0f} s, whole test {total_seconds:.0f} s")
    assert total_seconds < 420


def _nth_run(metadata: Metadata, index: int, dag_id: str = INGEST) -> Run | None:
    runs = [r for r in metadata.runs(dag_id) if r.run_type == "scheduled"]
    return runs[index] if len(runs) > index else None


def _finished_run(metadata: Metadata, index: int, dag_id: str) -> Run | None:
    run = _nth_run(metadata, index, dag_id)
    return run if run is not None and run.state in ("success", "failed") else None


def unpause(venv: Path, home: Path, extra: dict[str, str], dag_id: str) -> None:
    run_airflow(venv, home, [str(venv / "bin" / "airflow"), "dags", "unpause", dag_id], extra)


def pause(venv: Path, home: Path, extra: dict[str, str], dag_id: str) -> None:
    run_airflow(venv, home, [str(venv / "bin" / "airflow"), "dags", "pause", dag_id], extra)


def batches_by_interval(lake: Path) -> dict[datetime, dict[str, set[str]]]:
    """The ledger's files by the data interval start in their batch id (`ivl-<start>-...`)."""
    from pipeline.lake import Lake, Ledger

    found: dict[datetime, dict[str, set[str]]] = {}
    for entry in Ledger(Lake(lake)).entries().to_pylist():
        prefix, start, _ = entry["batch_id"].split("-", 2)
        assert prefix == "ivl", entry
        moment = datetime.strptime(start, "%Y%m%dT%H%M").replace(tzinfo=UTC)
        found.setdefault(moment, {}).setdefault(entry["batch_id"], set()).add(entry["path"])
    return found


def committed_tables(lake: Path, batch_ids: list[str]) -> list[str]:
    from pipeline.lake import Lake
    from pipeline.maintenance import committed_tables as tables_of

    return tables_of(Lake(lake), batch_ids)
