"""fuzz/fuzz_websocket.py beyond what every target is tested for (tests/fuzz/test_targets.py)."""

from __future__ import annotations

from fuzz import fuzz_websocket as target


def test_there_are_seeds_of_every_kind() -> None:
    assert len(target.seeds()) >= 20
