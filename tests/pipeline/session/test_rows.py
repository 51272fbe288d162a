from __future__ import annotations

from pipeline.session.rows import heartbeat_row
from pipeline.session.streams import make_stamp

T0 = 1_700_000_000_000_000_000
AT = make_stamp(T0)


def test_heartbeat_row_lateness_uses_the_configured_thresholds() -> None:
    row = heartbeat_row("s", "c2s", AT, 9, 2500.0, 1000, (2.0, 3.0, 4.0))
    assert row["lateness_ms"] == 1500.0
    assert (row["late_1x"], row["late_1_5x"], row["late_2x"]) == (True, False, False)
    row = heartbeat_row("s", "c2s", AT, 9, None, 1000, (1.0, 1.5, 2.0))
    assert row["lateness_ms"] is None and row["late_1x"] is None
