"""Fixtures for the DAG tests: the DAG helpers importable, the real Airflow in its own venv, and
one lake the ingestion DAG built, shared by the ingestion and maintenance tests.

`.venv-airflow` is created by scripts/airflow-venv.sh at the first test that needs Airflow (~40 s
on a clean clone, instant afterwards); a failure there is an error of those tests, never a skip.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DAGS = REPO / "dags"
SAMPLES = REPO / "samples"

if str(DAGS) not in sys.path:  # as Airflow does: the DAG folder is on sys.path
    sys.path.insert(0, str(DAGS))

INGEST_LOGICAL_DATE = "2026-11-20T10:00:00+00:00"  # @hourly: the run covers [09:00, 10:00)
EMPTY_LOGICAL_DATE = "2026-11-20T12:00:00+00:00"  # no capture closed in [11:00, 12:00)
INSIDE_INTERVAL = datetime(2026, 11, 20, 9, 30, tzinfo=UTC).timestamp()
# Closed in the interval: three whole samples and the first half of one cut at its middle, as
# rotation would, so connections open at the cut are carried (with the one the RabbitMQ sample
# leaves open) for the maintenance DAG to expire.
WHOLE_SAMPLES: tuple[str, ...] = ("activemq-queues-acks.pcap", "rabbitmq-heartbeat-errors.pcap")
WHOLE_SAMPLES += ("rabbitmq-topics-tx.pcapng",)
SPLIT_SAMPLE = "activemq-heartbeat-v10.pcap"
# The Spark master comes from the Airflow Connection; the environment says otherwise.
SPARK_CONNECTION = '{"conn_type": "spark", "host": "local[2]"}'


@dataclass(frozen=True, slots=True)
class IngestedInterval:
    captures: Path
    lake: Path
    env: dict[str, str]
    result: dict  # what dag_probe.py reports of the run
    rerun: dict  # and of a second run of the same interval, right after
    empty: dict  # a run of an interval in which no capture was closed (another lake)
    empty_lake: Path
    unconfigured: dict  # a run without the capture folder setting

    def to_json(self) -> str:
        fields = {name: getattr(self, name) for name in self.__slots__}
        return json.dumps({k: str(v) if isinstance(v, Path) else v for k, v in fields.items()})

    @classmethod
    def from_json(cls, text: str) -> IngestedInterval:
        fields = json.loads(text)
        for name in ("captures", "lake", "empty_lake"):
            fields[name] = Path(fields[name])
        return cls(**fields)


def ingest_env(captures: Path, lake: Path) -> dict[str, str]:
    return {
        "STOMP_LAKE_CAPTURE_DIR": str(captures),
        "STOMP_LAKE_LAKE": str(lake),
        "AIRFLOW_CONN_STOMP_LAKE_SPARK": SPARK_CONNECTION,
        "STOMP_LAKE_SPARK_MASTER": "local[1]",
        "STOMP_LAKE_TASK_RETRIES": "0",  # dag.test() would sit through the retry back-off
    }


@pytest.fixture(scope="session")
def airflow_venv() -> Path:
    from tests.dags.airflow_runner import ensure_airflow_venv

    return ensure_airflow_venv()


@pytest.fixture(scope="session")
def airflow_home(airflow_venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An AIRFLOW_HOME with a migrated SQLite metadata database, shared by the DAG tests."""
    from tests.dags.airflow_runner import migrate

    home = tmp_path_factory.mktemp("airflow-home")
    migrate(airflow_venv, home)
    return home


@pytest.fixture(scope="session")
def dag_report(airflow_venv: Path, airflow_home: Path) -> dict:
    """What a DagBag of the DAG folder holds, parsed once by the real Airflow."""
    from tests.dags.airflow_runner import probe

    return probe(airflow_venv, airflow_home, ["report"])


@pytest.fixture(scope="session")
def ingested_interval(
    airflow_venv: Path,
    airflow_home: Path,
    tmp_path_factory: pytest.TempPathFactory,
    worker_id: str,
) -> IngestedInterval:
    """`dag.test()` of the ingestion DAG over one interval of sample captures, with validation,
    then again; before them, a run of an empty interval and one missing a setting. One Airflow
    process for all: its start-up costs seconds. Made once for all the test workers (pytest-xdist
    gives each its own session): the first to ask makes it, the others read what it recorded, as
    the tests only read it."""
    if worker_id == "master":
        return _ingest_interval(airflow_venv, airflow_home, tmp_path_factory)
    shared = tmp_path_factory.getbasetemp().parent / "ingested-interval.json"
    with open(f"{shared}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if shared.exists():
            return IngestedInterval.from_json(shared.read_text())
        interval = _ingest_interval(airflow_venv, airflow_home, tmp_path_factory)
        shared.write_text(interval.to_json())
        return interval


def _ingest_interval(
    airflow_venv: Path, airflow_home: Path, tmp_path_factory: pytest.TempPathFactory
) -> IngestedInterval:
    from tests.dags.airflow_runner import run_dags
    from tests.support.split_capture import split_by_time

    root = tmp_path_factory.mktemp("ingest")
    captures, lake = root / "captures", root / "lake"
    captures.mkdir()
    for name in WHOLE_SAMPLES:
        shutil.copy(SAMPLES / name, captures / name)
    first_half, _ = split_by_time(SAMPLES / SPLIT_SAMPLE, root / "parts")
    shutil.copy(first_half, captures / first_half.name)
    for capture in captures.iterdir():
        os.utime(capture, (INSIDE_INTERVAL, INSIDE_INTERVAL))
    env = ingest_env(captures, lake)
    empty_lake = root / "empty-lake"
    runs = [
        {"logical_date": EMPTY_LOGICAL_DATE, "env": ingest_env(captures, empty_lake)},
        # default retries: a configuration error must fail at once without them
        {"logical_date": INGEST_LOGICAL_DATE, "env": {"STOMP_LAKE_LAKE": str(root / "other")}},
        {"logical_date": INGEST_LOGICAL_DATE, "env": env},
        {"logical_date": INGEST_LOGICAL_DATE, "env": env},
    ]
    empty, unconfigured, first, again = run_dags(
        airflow_venv, airflow_home, [{"dag_id": "stomp_lake_ingest", **run} for run in runs]
    )
    return IngestedInterval(captures, lake, env, first, again, empty, empty_lake, unconfigured)
