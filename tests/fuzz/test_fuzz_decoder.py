"""A short run of fuzz/fuzz_decoder.py (the sustained run and its result: fuzz/README.md)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from fuzz import fuzz_decoder as target


def test_seeds_pass() -> None:
    for seed in target.seeds():
        target.check(seed)


@settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(data=target.strategy())
def test_short_fuzz_run(data: bytes) -> None:
    target.check(data)
