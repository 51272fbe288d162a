"""fuzz/fuzz_tls.py beyond what every target is tested for (tests/fuzz/test_targets.py)."""

from __future__ import annotations

from fuzz import fuzz_tls as target


def test_there_are_seeds_of_every_kind() -> None:
    assert len(target.seeds()) >= 8


def test_seeds_decrypt() -> None:
    """The seeds reach the decryption, not only the parsers: their plaintext comes out."""
    for seed in target.seeds()[::2]:
        flags, chunk_seed, text, wire = target.parse(seed)
        keys = target.KeyLog()
        keys.add_lines(text.splitlines())
        plain, anomalies, facts = target.feed(keys, wire, flags, chunk_seed, chunked=True)
        assert b"SEND" in plain[target.Direction.C2S] and not anomalies and facts[2]
