"""The preload imports GX while the capture pass runs, and never while another thread imports;
Spark's start, on a thread of its own, imports nothing."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from pipeline.runner import SparkStart
from pipeline.startup.preload import THREAD_NAME
from tests.support.paths import SAMPLES
from tests.support.scripts import run_script

SPARK_START = """
import json, os, sys
from pipeline.spark.session import build_spark
from pipeline.spark.session import IMPORTED_BY_START
for name in IMPORTED_BY_START:
    __import__(name)
before = set(sys.modules)
build_spark("local[1]")
print(json.dumps(sorted(set(sys.modules) - before)))
sys.stdout.flush()
os._exit(0)
"""

# Every import a whole run attempts (with a live progress display if asked), with the thread that
# attempted it, whether the preload thread was alive then, and whether Spark's start was.
RUN_RECORDING_IMPORTS = """
import io, json, os, sys, threading
from pathlib import Path
from pipeline.startup.preload import THREAD_NAME

attempts = []
EARLY_START_THREAD = sys.argv[3]

class ImportRecorder:
    def find_spec(self, fullname, path=None, target=None):
        names = [t.name for t in threading.enumerate()]
        preloading = THREAD_NAME in names
        early = any(n.startswith(EARLY_START_THREAD) for n in names)
        attempts.append((threading.current_thread().name, fullname, preloading, early))
        return None

sys.meta_path.insert(0, ImportRecorder())
from pipeline.commands.progress import RunProgress
from pipeline.commands.run import RunConfig, run

config = RunConfig(inputs=[Path(sys.argv[1])], lake=Path(sys.argv[2]), close_open=True)
if sys.argv[4] == "live":
    with RunProgress(0, io.StringIO(), live=True, interval_s=0.05) as progress:
        result = run(config, progress=progress)
else:
    result = run(config, progress=lambda _: None)
assert result.validation is not None and result.validation.success
print(json.dumps(attempts))
sys.stdout.flush()
os._exit(0)
"""

PRELOAD_FAILS = """
import sys, threading
from pipeline.startup.preload import preloading

sys.modules["great_expectations"] = None  # any import of it now fails
errors = []
threading.excepthook = errors.append
with preloading():
    pass
assert not errors, errors
try:
    import great_expectations
except ImportError as error:
    print("gate sees:", type(error).__name__)
"""


def _exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


@pytest.mark.spark
def test_starting_spark_imports_nothing_once_its_modules_are_imported(tmp_path: Path) -> None:
    assert json.loads(run_script(SPARK_START, tmp_path)) == []


@pytest.mark.spark
@pytest.mark.parametrize("progress", ["quiet", "live"])
def test_a_run_never_imports_on_two_threads_at_once(tmp_path: Path, progress: str) -> None:
    script = RUN_RECORDING_IMPORTS
    lake = tmp_path / "lake"
    arguments = (str(SAMPLES), str(lake), SparkStart.THREAD_NAME, progress)
    attempts = json.loads(run_script(script, tmp_path, *arguments))
    # Looking for a module that is not installed takes no lock another import could wait on.
    found = [attempt for attempt in attempts if _exists(attempt[1])]
    # The preload imported GX; Spark had started early (the samples were new to the lake)
    assert any(t == THREAD_NAME and n == "great_expectations" for t, n, _, _ in found)
    assert any(early for _, _, _, early in found)
    assert {(t, n) for t, n, preloading, _ in found if preloading and t != THREAD_NAME} == set()
    # The progress display's own threads (rich's refresh, the Spark poll) import nothing.
    assert {(t, n) for t, n, _, _ in found if t not in ("MainThread", THREAD_NAME)} == set()


def test_a_failed_preload_is_quiet_and_leaves_the_error_to_the_gate(tmp_path: Path) -> None:
    assert run_script(PRELOAD_FAILS, tmp_path) == "gate sees: ModuleNotFoundError"
