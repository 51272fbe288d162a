"""Every fuzz target (fuzz/fuzz_*.py) briefly, as a test: its seeds, the inputs that once broke
it (fuzz/regressions/), and a short hypothesis run of its strategy. The sustained runs and
their results: fuzz/README.md."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings

from fuzz import harness

# target -> examples of its short run (fewer where one input costs more)
SHORT_RUNS = {
    "fuzz_capture_reader": 300,
    "fuzz_decoder": 200,
    "fuzz_flow": 100,
    "fuzz_masker": 300,
    "fuzz_reassembly": 150,
    "fuzz_tls": 300,
    "fuzz_websocket": 300,
}


def target(name: str) -> ModuleType:
    return importlib.import_module(f"fuzz.{name}")


def test_every_target_is_run() -> None:
    targets = {path.stem for path in Path(harness.__file__).parent.glob("fuzz_*.py")}
    assert targets == set(SHORT_RUNS)


@pytest.mark.parametrize("name", SHORT_RUNS)
def test_seeds_pass(name: str) -> None:
    fuzzed = target(name)
    for seed in fuzzed.seeds():
        fuzzed.check(seed)


@pytest.mark.parametrize(
    ("name", "path"),
    [(name, path) for name in SHORT_RUNS for path in harness.regressions(target(name))],
    ids=lambda value: value.name if isinstance(value, Path) else value,
)
def test_inputs_that_once_failed(name: str, path: Path) -> None:
    target(name).check(path.read_bytes())


@pytest.mark.parametrize("name", SHORT_RUNS)
def test_short_fuzz_run(name: str) -> None:
    fuzzed = target(name)

    @settings(
        max_examples=SHORT_RUNS[name],
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=fuzzed.strategy())
    def run(data: bytes) -> None:
        fuzzed.check(data)

    run()
