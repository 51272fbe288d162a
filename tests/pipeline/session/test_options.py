from __future__ import annotations

import pickle

import pytest

from pipeline.session import Endpoint, ModelOptions


def test_defaults_store_hashes_only() -> None:
    options = ModelOptions()
    assert options.body_mode == "hash" and options.login_hash_key is None
    assert options.late_thresholds == (1.0, 1.5, 2.0)
    assert Endpoint("::1", 61613).port == 61613


@pytest.mark.parametrize(
    "kwargs",
    [
        {"body_mode": "all"},
        {"preview_bytes": -1},
        {"max_pending_messages": 0},
        {"max_pending_bytes": 0},
        {"max_pending_in_memory": 0},
    ],
)
def test_invalid_options_are_rejected(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        ModelOptions(**kwargs)


def test_options_carried_by_an_earlier_release_get_defaults_for_later_fields() -> None:
    state: list[object] = ModelOptions(max_pending_messages=7).__getstate__()  # type: ignore[assignment]
    older = ModelOptions.__new__(ModelOptions)
    older.__setstate__(state[:-1])  # type: ignore[attr-defined] # without max_pending_in_memory
    assert older.max_pending_messages == 7 and older.max_pending_in_memory == 10_000
    assert pickle.loads(pickle.dumps(older)) == older
