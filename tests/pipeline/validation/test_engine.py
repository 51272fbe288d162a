"""pipeline/validation/engine.py: which engine a batch's suites run on, and the interface both
engines offer the gate. What each engine does is tested in test_on_duckdb.py and, on Spark,
through test_gate.py and test_checks.py."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from pipeline.lake import Lake
from pipeline.validation.engine import SuiteEngine, open_engine
from pipeline.validation.on_duckdb import DuckDbEngine
from pipeline.validation.on_spark import SparkEngine

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

INTERFACE = ("start_checks", "define", "run_suite", "rows", "failing_rows", "close")


class UntouchedSpark:
    """Stands for the run's SparkSession where choosing DuckDB must not use it."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"Spark was used: .{name}")


class SessionsOnly:
    """Stands for the run's SparkSession, to see the Spark engine chosen without starting Spark:
    the engine's construction asks it only for sessions of its own."""

    def newSession(self) -> SessionsOnly:  # Spark's name
        return self


def _spark(stand_in: object) -> SparkSession:
    return cast("SparkSession", stand_in)


@pytest.mark.parametrize(
    "local_files",
    [
        {"frames": [Path("/staged/frames/date=2025-01-01/part-0.parquet")]},
        {},  # files on this machine, none of them rows: every table empty
    ],
)
def test_files_on_this_machine_run_the_suites_on_duckdb_without_spark(
    tmp_path: Path, local_files: dict[str, list[Path]]
) -> None:
    lake = Lake(tmp_path / "lake")
    tables = cast("dict[str, DataFrame]", {})
    counts = {"frames": 1}
    engine = open_engine(
        _spark(UntouchedSpark()), lake, "b1", tables, counts, local_files=local_files
    )
    assert isinstance(engine, DuckDbEngine)
    assert engine.files is local_files and engine.counts is counts and engine.tables is tables
    assert engine.lake == lake and engine.batch_id == "b1" and engine.open_sessions is None
    assert not (lake.runs_dir / "b1").exists()  # nothing is made before the checks start


def test_without_local_files_the_suites_run_on_spark(tmp_path: Path) -> None:
    spark = SessionsOnly()
    open_sessions = cast("DataFrame", object())
    engine = open_engine(
        _spark(spark), Lake(tmp_path / "lake"), "b1", {}, {}, open_sessions=open_sessions
    )
    assert isinstance(engine, SparkEngine)
    assert engine.spark is spark and engine.open_sessions is open_sessions


def test_the_interface_names_what_the_gate_drives() -> None:
    public = {n for n, v in vars(SuiteEngine).items() if callable(v) and not n.startswith("_")}
    assert public == set(INTERFACE)


@pytest.mark.parametrize("engine", [DuckDbEngine, SparkEngine])
@pytest.mark.parametrize("method", INTERFACE)
def test_both_engines_take_what_the_interface_passes(engine: type, method: str) -> None:
    def parameters(function: Any) -> list[tuple[str, Any]]:
        return [(p.name, p.kind) for p in inspect.signature(function).parameters.values()]

    assert parameters(getattr(engine, method)) == parameters(getattr(SuiteEngine, method))
