"""Run by the AIRFLOW venv's Python (not pytest's): load the DAG folder, report or test DAGs.

    python dag_probe.py report
    python dag_probe.py test '[{"dag_id": ..., "logical_date": ..., "env": {...}}, ...]'
    python dag_probe.py settings '[{...env...}, ...]'

Several runs share one process (Airflow's start-up costs seconds); each gets its own environment
variables on top of the process's, as the tasks read them at run time. Before each run a line
`@@run N` marks where its log starts; the last line `@@<json>` is the result for the test.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

DAGS = Path(__file__).resolve().parents[2] / "dags"


def load() -> tuple[Any, float]:  # an Airflow DagBag
    from airflow.dag_processing.dagbag import DagBag

    started = time.monotonic()
    bag = DagBag(dag_folder=str(DAGS))
    return bag, time.monotonic() - started


def report() -> dict:
    bag, seconds = load()
    dags = {}
    for dag_id, dag in bag.dags.items():
        dags[dag_id] = {
            "timetable": type(dag.timetable).__name__,
            "expression": getattr(dag.timetable, "expression", None),
            "tags": sorted(dag.tags),
            "catchup": dag.catchup,
            "max_active_runs": dag.max_active_runs,
            "tasks": {
                task.task_id: {
                    "retries": task.retries,
                    "exponential_backoff": task.retry_exponential_backoff,
                    "outlets": sorted(
                        f"{type(o).__name__}:{getattr(o, 'name', o)}" for o in task.outlets
                    ),
                    "upstream": sorted(task.upstream_task_ids),
                }
                for task in dag.tasks
            },
        }
    heavy = [m for m in ("pyspark", "pipeline", "deltalake", "pyarrow") if m in sys.modules]
    return {
        "import_errors": {str(k): v for k, v in bag.import_errors.items()},
        "files": sorted(Path(f).name for f in bag.file_last_changed),
        "dags": dags,
        "heavy_modules": heavy,
        "parse_seconds": seconds,
    }


def test(spec: str) -> list[dict]:
    results = []
    for number, run in enumerate(json.loads(spec)):
        print(f"@@run {number}", flush=True)
        with _environment(run.get("env", {})):
            results.append(test_one(run["dag_id"], run["logical_date"]))
    return results


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def test_one(dag_id: str, logical_date: str) -> dict:
    import pendulum
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import func, select

    bag, _ = load()
    dag = bag.dags[dag_id]
    with create_session() as session:  # dag.test() of a logical date reuses its run: new only
        last_event = session.scalar(select(func.max(AssetEvent.id))) or 0
    run = dag.test(logical_date=pendulum.parse(logical_date))
    with create_session() as session:
        events = session.execute(
            select(AssetModel.name, AssetEvent.source_task_id, AssetEvent.extra)
            .join(AssetEvent, AssetEvent.asset_id == AssetModel.id)
            .where(AssetEvent.source_run_id == run.run_id, AssetEvent.id > last_event)
        ).all()
        xcoms = session.execute(
            select(XComModel.task_id, XComModel.value).where(
                XComModel.dag_id == dag_id,
                XComModel.run_id == run.run_id,
                XComModel.key == "return_value",
            )
        ).all()
    instances = run.get_task_instances()
    return {
        "state": str(run.state),
        "data_interval": [str(run.data_interval_start), str(run.data_interval_end)],
        "tasks": {ti.task_id: str(ti.state) for ti in instances},
        "tries": {ti.task_id: ti.try_number for ti in instances},
        "asset_events": sorted(name for name, _, _ in events),
        "event_sources": sorted({task for _, task, _ in events}),
        "event_extras": [extra for _, _, extra in events],
        "xcoms": {task: XComModel.deserialize_value(_Row(value)) for task, value in xcoms},
    }


class _Row:
    """What XComModel.deserialize_value reads a stored value from."""

    def __init__(self, value: object) -> None:
        self.value = value


def settings(cases: str) -> list[dict]:
    """The settings a task would resolve, from Airflow's secrets backends and the environment."""
    sys.path.insert(0, str(DAGS))
    from stomp_lake_dags.airflow_settings import current_settings

    results = []
    for env in json.loads(cases):
        with _environment(env):
            resolved = current_settings()
        results.append({"spark_master": resolved.spark_master, "lake": str(resolved.lake)})
    return results


if __name__ == "__main__":
    commands: dict[str, Callable[..., Any]] = {"report": report, "test": test, "settings": settings}
    result = commands[sys.argv[1]](*sys.argv[2:])
    print("@@" + json.dumps(result, default=str), flush=True)
