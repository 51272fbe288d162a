from __future__ import annotations

from pipeline.session.outbox import COUNTED, Outbox
from pipeline.session.streams import make_chunk, make_stamp
from schemas import TABLES, load

T0 = 1_700_000_000_000_000_000


def test_drain_hands_over_rows_and_keeps_the_tables_dict() -> None:
    out = Outbox("s1")
    tables = out.tables
    tables["messages"].append({"x": 1})
    frames = out.frames
    drained = out.drain()
    assert drained["messages"] == [{"x": 1}] and set(drained) == set(TABLES)
    assert drained["frames"] is frames
    assert out.tables is tables and tables["messages"] == []
    assert tables["frames"] is out.frames and len(out.frames) == 0


def test_violations_are_counted_scrubbed_and_attributed() -> None:
    out = Outbox("s1")
    out.add_secrets(["open-sesame"])
    out.last = make_stamp(T0)
    out.violation("bad", "c2s", make_chunk(0, 9, T0 + 5, ("a.pcap", 24)), 3, "open-sesame!")
    out.anomaly("tcp", "gap", "s2c", None, 7, "passcode:xyz lost")
    violation, gap = out.drain()["anomalies"]
    assert out.counts["violations"] == 1
    assert violation["detail"] == "***!" and violation["file"] == "a.pcap"
    assert violation["file_offset"] == 24 and violation["ts_ns"] == T0 + 5
    assert gap["detail"] == "passcode:*** lost" and gap["ts_ns"] == T0 and gap["file"] is None


def test_counters_are_sessions_columns() -> None:
    assert set(COUNTED) <= set(load("sessions").column_names)
