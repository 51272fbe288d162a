from __future__ import annotations

from datetime import UTC, datetime

from pipeline.session.clock import elapsed_ms, to_datetime


def test_to_datetime_keeps_exact_microseconds_on_current_dates() -> None:
    # 1.7e18 ns as float seconds would lose the last microsecond digits
    assert to_datetime(1_700_000_000_123_456_999) == datetime(
        2023, 11, 14, 22, 13, 20, 123456, tzinfo=UTC
    )
    assert to_datetime(0) == datetime(1970, 1, 1, tzinfo=UTC)


def test_elapsed_ms() -> None:
    assert elapsed_ms(1_000_000, 3_500_000) == 2.5
    assert elapsed_ms(5, 5) == 0.0
