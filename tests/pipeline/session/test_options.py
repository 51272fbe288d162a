from __future__ import annotations

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
    ],
)
def test_invalid_options_are_rejected(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        ModelOptions(**kwargs)
