"""The cross-table checks of :mod:`pipeline.validation.checks`, as DuckDB relations beside the
batch's table views (:mod:`pipeline.validation.local_sql`): the same rows and columns, so that
the same two suites judge them. `tests/pipeline/validation/test_local_checks.py` holds the two
to the same rows on good and broken batches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

import schemas
from pipeline.lake.engines import sql_string
from pipeline.session.protocol import UNMATCHED_AFTER_OVERFLOW
from pipeline.validation.checks import CHILD_TABLES, batch_check_rows

SESSION_CHECKS = """
WITH sessions_ AS (
    SELECT session_id, started_at_ns, ended_at_ns, c2s_frames + s2c_frames AS counted,
           heartbeat_c2s_ms, heartbeat_s2c_ms
    FROM sessions
),
ids AS (
    SELECT DISTINCT session_id FROM (
        {referenced}
        UNION ALL SELECT session_id FROM sessions_
    )
),
known AS (
    SELECT DISTINCT session_id, TRUE AS known FROM (
        SELECT session_id FROM known_sessions UNION ALL SELECT session_id FROM sessions_
    )
),
frames_ AS (
    SELECT session_id, count(*) AS frames_in_batch, min(frame_index) AS first_index,
           min(ts_ns) AS first_ns, max(ts_end_ns) AS last_ns
    FROM frames GROUP BY session_id
),
beats AS (
    SELECT h.session_id,
           sum(CAST(h.expected_ms IS NOT NULL AND h.expected_ms IS DISTINCT FROM
                    (CASE WHEN h.direction = 'c2s' THEN s.heartbeat_c2s_ms
                          ELSE s.heartbeat_s2c_ms END) AS BIGINT)) AS beats_off,
           sum(CAST(h.ts_ns < s.started_at_ns OR h.ts_ns > s.ended_at_ns AS BIGINT))
               AS beats_outside
    FROM heartbeats h JOIN sessions_ s ON h.session_id = s.session_id
    GROUP BY h.session_id
)
SELECT ids.session_id,
       coalesce(known.known, FALSE) AS known_session,
       frames_.frames_in_batch,
       CASE WHEN s.started_at_ns IS NOT NULL AND frames_.first_index = 0 THEN s.counted END
           AS frames_counted,
       coalesce(beats.beats_off, 0) AS heartbeats_off_interval,
       coalesce(CAST(frames_.first_ns < s.started_at_ns OR frames_.last_ns > s.ended_at_ns
                     AS BIGINT), 0)
           + coalesce(beats.beats_outside, 0) AS rows_outside_session,
       CAST({after_capture} AS BIGINT) AS rows_after_capture
FROM ids
LEFT JOIN known ON ids.session_id = known.session_id
LEFT JOIN sessions_ s ON ids.session_id = s.session_id
LEFT JOIN frames_ ON ids.session_id = frames_.session_id
LEFT JOIN beats ON ids.session_id = beats.session_id
"""


@dataclass(slots=True)
class CheckInputs:
    """What the checks need besides the batch's tables: the sessions published before (files of
    the lake's ``sessions`` snapshot), those still open, the run's counters and the time of the
    batch's last packet."""

    published_files: list[str] = field(default_factory=list)
    open_sessions: list[str] = field(default_factory=list)
    counts: dict[str, Any] = field(default_factory=dict)
    capture_last_ns: int | None = None


def create(db: Any, inputs: CheckInputs) -> None:
    """``known_sessions``, then ``session_consistency`` and ``batch_consistency`` in the DuckDB
    database ``db``: both tables, computed now (a row per session, a row per table), where a
    view would be computed again by each of their suites' queries."""
    known = pa.table({"session_id": pa.array(inputs.open_sessions, pa.string())})
    db.register("open_sessions", known)
    db.execute("CREATE TABLE open_session_ids AS SELECT session_id FROM open_sessions")
    db.unregister("open_sessions")
    published = "SELECT NULL::VARCHAR AS session_id WHERE FALSE"
    if inputs.published_files:
        names = ", ".join(sql_string(f) for f in inputs.published_files)
        published = f"SELECT session_id FROM read_parquet([{names}], union_by_name = true)"
    db.execute(
        "CREATE VIEW known_sessions AS "
        f"{published} UNION ALL SELECT session_id FROM open_session_ids"
    )
    referenced = "\n        UNION ALL ".join(
        f'SELECT session_id FROM "{t}" WHERE session_id IS NOT NULL' for t in CHILD_TABLES
    )
    last = inputs.capture_last_ns
    after_capture = "0"
    if last is not None:
        late = " + ".join(
            f"coalesce(CAST({column} > {int(last)} AS BIGINT), 0)"
            for column in ("s.ended_at_ns", "frames_.last_ns")
        )
        # a session started after the batch's last packet was carried in from a later capture
        after_capture = f"CASE WHEN s.started_at_ns > {int(last)} THEN 0 ELSE {late} END"
    query = SESSION_CHECKS.format(referenced=referenced, after_capture=after_capture)
    db.execute(f"CREATE TABLE session_consistency AS {query}")

    rows = {t: db.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in schemas.TABLES}
    total, resolved = db.execute(
        "SELECT count(*), sum(CAST(delivered_at_ns IS NOT NULL AS BIGINT)) FROM acks"
    ).fetchone()
    unresolvable = db.execute(
        "SELECT count(*) FROM anomalies WHERE source = 'stomp' AND kind = "
        f"{sql_string(UNMATCHED_AFTER_OVERFLOW)}"
    ).fetchone()[0]
    total -= unresolvable
    table = pa.Table.from_pylist(
        batch_check_rows(rows, total, resolved, inputs.counts), schema=BATCH_CHECKS
    )
    db.register("batch_rows", table)
    db.execute("CREATE TABLE batch_consistency AS SELECT * FROM batch_rows")
    db.unregister("batch_rows")


BATCH_CHECKS = pa.schema(
    [
        pa.field("table", pa.string()),
        pa.field("table_rows", pa.int64()),
        pa.field("run_counter", pa.int64()),
        pa.field("acks_total", pa.int64()),
        pa.field("resolved_share", pa.float64()),
    ]
)
