from __future__ import annotations

import pytest

import schemas
from pipeline.validation.checks import batch_checks
from tests.pipeline.lake.conftest import runs_python
from tests.pipeline.validation.batch_rows import counts_of, good_batch, to_frames

pytestmark = pytest.mark.spark


def test_batch_checks_count_every_table_against_the_runs_counters(spark) -> None:
    rows = good_batch("b1")
    counts = {**counts_of(rows), "frames": len(rows["frames"]) + 1, "errors": True}
    checks = batch_checks(spark, to_frames(spark, rows), counts)
    assert not runs_python(checks)  # a relation in the JVM: its suite's queries start no Python
    found = {r["table"]: r.asDict() for r in checks.collect()}
    assert list(found) == list(schemas.TABLES)
    for table, row in found.items():
        assert row["table_rows"] == len(rows[table]), table
    assert found["frames"]["run_counter"] == len(rows["frames"]) + 1
    assert found["errors"]["run_counter"] is None  # not a counter
    acks = found["acks"]
    assert acks["acks_total"] == len(rows["acks"])
    resolved = sum(1 for r in rows["acks"] if r["delivered_at_ns"] is not None)
    assert acks["resolved_share"] == resolved / len(rows["acks"])
    assert all(found[t]["acks_total"] is None for t in schemas.TABLES if t != "acks")
