"""A short run of fuzz/fuzz_flow.py (the sustained run and its result: fuzz/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from fuzz import fuzz_flow as target
from fuzz import harness


def test_seeds_pass() -> None:
    for seed in target.seeds():
        target.check(seed)


@pytest.mark.parametrize("path", harness.regressions(target), ids=lambda path: path.name)
def test_inputs_that_once_failed(path: Path) -> None:
    target.check(path.read_bytes())


@settings(
    max_examples=100,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(data=target.strategy())
def test_short_fuzz_run(data: bytes) -> None:
    target.check(data)
