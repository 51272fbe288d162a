"""The README's "## Airflow" section, run as written: its shell block, parsed out of README.md, in
a fresh copy of the checkout (symlinks to the repository, with its own empty `work/`), must
succeed, both DAG runs must end in success, and the lake must then hold the tables."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.dags.airflow_runner import airflow_env
from tests.support.paths import REPO

README = REPO / "README.md"
SECTION = "## Airflow"
README_DAG_RUNS = {"stomp_lake_ingest": 1, "stomp_lake_maintenance": 1}

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def section_commands(readme: str, heading: str) -> str:
    """The first ```sh block under `heading` (up to the next heading of the same level)."""
    start = readme.index(f"\n{heading}\n")
    following = re.search(r"^## ", readme[start + len(heading) + 2 :], flags=re.MULTILINE)
    end = start + len(heading) + 2 + following.start() if following else len(readme)
    block = re.search(r"^```sh\n(.*?)^```$", readme[start:end], flags=re.MULTILINE | re.DOTALL)
    if block is None:
        raise AssertionError(f"no ```sh block in the README section {heading!r}")
    return block.group(1)


def checkout_copy(root: Path) -> Path:
    """A folder that looks like the checkout to the README's commands (`$PWD/...`, `make`,
    `.venv`, `.venv-airflow`) but whose `work/` is its own."""
    copy = root / "checkout"
    copy.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in {"work", ".git"}:
            (copy / entry.name).symlink_to(entry)
    return copy


def test_section_commands_are_the_documented_ones() -> None:
    commands = section_commands(README.read_text(), SECTION)
    assert commands.splitlines()[0] == "make venv airflow"
    for dag_id in README_DAG_RUNS:
        assert f".venv-airflow/bin/airflow dags test {dag_id} " in commands


def test_readme_airflow_section_runs_as_written(airflow_venv: Path, tmp_path: Path) -> None:
    # The copy's `make venv` must find the pipeline venv up to date: were it stale, it would
    # reinstall the shared .venv in editable mode from the temporary copy. So bring it up to
    # date in the repository itself first, as `make test` does.
    if subprocess.run(["make", "-q", "venv"], cwd=REPO, check=False).returncode != 0:
        subprocess.run(["make", "venv"], cwd=REPO, check=True, timeout=900)
    checkout = checkout_copy(tmp_path)
    commands = section_commands(README.read_text(), SECTION)
    env = {k: v for k, v in airflow_env(tmp_path).items() if not k.startswith("AIRFLOW")}
    env["PWD"] = str(checkout)
    log = tmp_path / "readme-airflow.log"
    with log.open("w") as output:
        done = subprocess.run(
            ["bash", "-euxo", "pipefail", "-c", commands],
            cwd=checkout, env=env, stdout=output, stderr=subprocess.STDOUT, timeout=900,
            check=False,
        )  # fmt: skip
    text = log.read_text()
    assert done.returncode == 0, f"README commands exited {done.returncode}:\n{text[-8000:]}"
    assert "terminate called" not in text

    home = checkout / "work" / "airflow"
    airflow = [str(checkout / ".venv-airflow" / "bin" / "airflow")]
    run_env = {**env, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags")}
    for dag_id, count in README_DAG_RUNS.items():
        listed = subprocess.run(
            [*airflow, "dags", "list-runs", dag_id, "-o", "json"],
            cwd=checkout, env=run_env, capture_output=True, text=True, timeout=300, check=True,
        )  # fmt: skip
        runs = json.loads(listed.stdout.splitlines()[-1])  # after Airflow's warnings
        assert [run["state"] for run in runs] == ["success"] * count, (dag_id, runs, text[-6000:])

    import schemas
    from pipeline.lake import Lake, list_tables

    rows = {info.name: info.rows for info in list_tables(Lake(checkout / "work" / "lake"))}
    assert set(schemas.TABLES) <= set(rows), rows  # every table, websocket ones empty here
    assert (rows["sessions"] or 0) > 0 and (rows["frames"] or 0) > 0, rows
