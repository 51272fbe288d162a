"""Run code under the real Airflow, in its own venv, with a throwaway SQLite metadata DB."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DAGS = REPO / "dags"
VENV_SCRIPT = REPO / "scripts" / "airflow-venv.sh"
PROBE = Path(__file__).resolve().with_name("dag_probe.py")


def ensure_airflow_venv() -> Path:
    """Create `.venv-airflow` through the project's script when missing (fast when present)."""
    done = subprocess.run(
        ["bash", str(VENV_SCRIPT)], capture_output=True, text=True, timeout=900, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{VENV_SCRIPT} failed:\n{done.stderr[-4000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def airflow_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "STOMP_LAKE_"))}
    env.pop("PYTHONPATH", None)
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        }
    )
    env.update(extra or {})
    return env


def migrate(venv: Path, home: Path) -> None:
    run_airflow(venv, home, [str(venv / "bin" / "airflow"), "db", "migrate"])


def run_airflow(
    venv: Path, home: Path, command: list[str], extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        command,
        env=airflow_env(home, extra_env),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=home,
    )
    if done.returncode != 0:
        raise AssertionError(
            f"{command[:3]} exited {done.returncode}\nstdout:\n{done.stdout[-6000:]}\n"
            f"stderr:\n{done.stderr[-6000:]}"
        )
    return done


def probe(
    venv: Path, home: Path, arguments: list[str], extra_env: dict[str, str] | None = None
) -> Any:
    """Run dag_probe.py with the Airflow venv's Python; the JSON of its `@@<json>` line."""
    return _probe(venv, home, arguments, extra_env)[0]


def run_dags(venv: Path, home: Path, runs: list[dict[str, Any]]) -> list[dict]:
    """`dag.test()` of each run (`dag_id`, `logical_date`, `env`) in one Airflow process; each
    result with `log_tail`, the lines of its own log worth reading."""
    results, output = _probe(venv, home, ["test", json.dumps(runs)], None)
    logs = re.split(r"^@@run \d+$", output, flags=re.MULTILINE)[1:]
    for result, log in zip(results, logs, strict=True):
        result["log_tail"] = _log_lines(log)
    return results


def run_dag(
    venv: Path, home: Path, dag_id: str, logical_date: str, env: dict[str, str] | None = None
) -> dict:
    run = {"dag_id": dag_id, "logical_date": logical_date, "env": env or {}}
    return run_dags(venv, home, [run])[0]


def _probe(
    venv: Path, home: Path, arguments: list[str], extra_env: dict[str, str] | None
) -> tuple[Any, str]:
    command = [str(venv / "bin" / "python"), str(PROBE), *arguments]
    done = run_airflow(venv, home, command, extra_env)
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("@@") and not line.startswith("@@run "):
            return json.loads(line[2:]), done.stdout
    raise AssertionError(f"no result line:\n{done.stdout[-6000:]}\n{done.stderr[-4000:]}")


# Pipeline progress and summary, stomp-lake maintain's lines, commands run, DAG messages, errors.
LOG_NEEDLES = (
    "[stomp-lake]", "validation:", "no new capture files", "check:", "expire-state:", "compact ",
    "vacuum ", "retain-captures:", "] + /", "Spark master", "Asset events", "nothing to ingest",
    "rror", "xception",
)  # fmt: skip


def _log_lines(text: str) -> str:
    """The lines of the task logs worth reading in a test or its failure message."""
    kept = [
        line
        for line in text.splitlines()
        if any(n in line for n in LOG_NEEDLES) and '{"ts": ' not in line  # Spark's JSON logs
    ]
    return "\n".join(kept)[-12000:]


if __name__ == "__main__":
    print(ensure_airflow_venv(), file=sys.stdout)
