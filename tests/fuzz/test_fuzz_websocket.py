"""A short run of fuzz/fuzz_websocket.py (the sustained run: fuzz/README.md)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from fuzz import fuzz_websocket as target
from fuzz.harness import regressions


def test_seeds_pass() -> None:
    seeds = target.seeds()
    assert len(seeds) >= 20
    for seed in seeds:
        target.check(seed)


def test_regressions_pass() -> None:
    for path in regressions(target):
        target.check(path.read_bytes())


@settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(data=target.strategy())
def test_short_fuzz_run(data: bytes) -> None:
    target.check(data)
