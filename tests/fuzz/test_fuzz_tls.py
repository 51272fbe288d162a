"""A short run of fuzz/fuzz_tls.py (the sustained run: fuzz/README.md)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from fuzz import fuzz_tls as target
from fuzz.harness import regressions


def test_seeds_pass() -> None:
    seeds = target.seeds()
    assert len(seeds) >= 8
    for seed in seeds:
        target.check(seed)


def test_seeds_decrypt() -> None:
    """The seeds reach the decryption, not only the parsers: their plaintext comes out."""
    for seed in target.seeds()[::2]:
        flags, chunk_seed, text, wire = target.parse(seed)
        keys = target.KeyLog()
        keys.add_lines(text.splitlines())
        plain, anomalies, facts = target.feed(keys, wire, flags, chunk_seed, chunked=True)
        assert b"SEND" in plain[target.Direction.C2S] and not anomalies and facts[2]


def test_regressions_pass() -> None:
    for path in regressions(target):
        target.check(path.read_bytes())


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(data=target.strategy())
def test_short_fuzz_run(data: bytes) -> None:
    target.check(data)
