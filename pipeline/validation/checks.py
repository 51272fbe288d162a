"""The cross-table checks, written once in SQL that Spark SQL and DuckDB both run, so that GX
expectations can validate them (suites ``session_consistency`` and ``batch_consistency``).

``session_consistency``: one row per session id met in the batch (orphans, frame counts,
heart-beat intervals, timestamps inside the session's life and not after the batch's capture
window). ``batch_consistency``: one row per table (row count against the run's counter; ack
resolution share on the ``acks`` row).

Each query names its relations as ``{table}`` fields: the batch's tables and
``known_sessions`` (column ``session_id``: sessions published before or still open). An engine
(:mod:`pipeline.validation.engine`) fills them with its own relations; the run's own figures
(counters, the last packet's time) are literals.

What the traffic does is never judged here (a wire violation is an anomaly row): the checks look
for the pipeline's own mistakes only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import schemas
from pipeline.session.protocol import UNMATCHED_AFTER_OVERFLOW

CHILD_TABLES: tuple[str, ...] = tuple(t for t in schemas.TABLES if t != "sessions")
KNOWN_SESSIONS = "known_sessions"
RELATIONS: tuple[str, ...] = (*schemas.TABLES, KNOWN_SESSIONS)  # the fields the queries name


def check_queries(counts: Mapping[str, Any]) -> dict[str, str]:
    """Each cross-table suite's relation, as a query over :data:`RELATIONS`."""
    return {
        "session_consistency": session_checks(_counter(counts.get("capture_last_ns"))),
        "batch_consistency": batch_checks(counts),
    }


def session_checks(capture_last_ns: int | None) -> str:
    """``capture_last_ns``: the time of the batch's last TCP packet, None when it had none.

    Nothing in a batch can be later than its last packet, but rows can be earlier than its first
    (a session, a frame or a heart-beat may begin in an earlier batch's packets): from below,
    rows are bounded by their session's lifetime only. A session that started after the batch's
    last packet was carried in from a later capture (older captures back-filled, its connection
    closed with ``--open-connections close``): its times come from that capture, and it is left
    out of ``rows_after_capture``."""
    referenced = "\n        UNION ALL ".join(
        f"SELECT session_id FROM {{{t}}} WHERE session_id IS NOT NULL" for t in CHILD_TABLES
    )
    # A closed session's frames and heart-beats end by its ended_at (rows_outside_session): its
    # end and the last frame of a session still open are all that can pass the capture's end.
    after_capture = "0"
    if capture_last_ns is not None:
        last = int(capture_last_ns)
        late = " + ".join(
            f"coalesce(CAST({column} > {last} AS BIGINT), 0)"
            for column in ("s.ended_at_ns", "f.last_ns")
        )
        after_capture = f"CASE WHEN s.started_at_ns > {last} THEN 0 ELSE {late} END"
    return f"""
WITH sessions_ AS (
    SELECT session_id, started_at_ns, ended_at_ns, c2s_frames + s2c_frames AS counted,
           heartbeat_c2s_ms, heartbeat_s2c_ms
    FROM {{sessions}}
),
ids AS (
    SELECT DISTINCT session_id FROM (
        {referenced}
        UNION ALL SELECT session_id FROM sessions_
    ) referenced
),
known AS (
    SELECT DISTINCT session_id, TRUE AS known FROM (
        SELECT session_id FROM {{{KNOWN_SESSIONS}}} UNION ALL SELECT session_id FROM sessions_
    ) known_ids
),
frames_ AS (
    SELECT session_id, count(*) AS frames_in_batch, min(frame_index) AS first_index,
           min(ts_ns) AS first_ns, max(ts_end_ns) AS last_ns
    FROM {{frames}} GROUP BY session_id
),
beats AS (
    SELECT h.session_id,
           sum(CAST(h.expected_ms IS NOT NULL AND h.expected_ms IS DISTINCT FROM
                    (CASE WHEN h.direction = 'c2s' THEN s.heartbeat_c2s_ms
                          ELSE s.heartbeat_s2c_ms END) AS BIGINT)) AS beats_off,
           sum(CAST(h.ts_ns < s.started_at_ns OR h.ts_ns > s.ended_at_ns AS BIGINT))
               AS beats_outside
    FROM {{heartbeats}} h JOIN sessions_ s ON h.session_id = s.session_id
    GROUP BY h.session_id
)
SELECT ids.session_id,
       coalesce(known.known, FALSE) AS known_session,
       f.frames_in_batch,
       CASE WHEN s.started_at_ns IS NOT NULL AND f.first_index = 0 THEN s.counted END
           AS frames_counted,
       CAST(coalesce(beats.beats_off, 0) AS BIGINT) AS heartbeats_off_interval,
       CAST(coalesce(CAST(f.first_ns < s.started_at_ns OR f.last_ns > s.ended_at_ns AS BIGINT), 0)
            + coalesce(beats.beats_outside, 0) AS BIGINT) AS rows_outside_session,
       CAST({after_capture} AS BIGINT) AS rows_after_capture
FROM ids
LEFT JOIN known ON ids.session_id = known.session_id
LEFT JOIN sessions_ s ON ids.session_id = s.session_id
LEFT JOIN frames_ f ON ids.session_id = f.session_id
LEFT JOIN beats ON ids.session_id = beats.session_id
"""


def batch_checks(counts: Mapping[str, Any]) -> str:
    """One row per table, in :data:`schemas.TABLES`' order: its rows against the run's counter
    (``run_counter``, null for a table the run does not count); on ``acks``, the share of acks
    resolved to their delivery. ``acks_total`` counts the acks that could resolve: those naming
    nothing on a connection that gave MESSAGEs up (anomaly ``ack_unmatched_after_overflow``: a
    lagging consumer) are left out."""
    # The rows of every table counted in one aggregate (one shuffle on Spark, not one a table);
    # a table with no row is still listed, by the left join.
    listed = "\n    UNION ALL ".join(
        f"SELECT {position} AS position, '{t}' AS table_name, "
        f"CAST({_literal(_counter(counts.get(t)))} AS BIGINT) AS run_counter"
        for position, t in enumerate(schemas.TABLES)
    )
    every_row = "\n        UNION ALL ".join(
        f"SELECT '{t}' AS table_name FROM {{{t}}}" for t in schemas.TABLES
    )
    return f"""
WITH listed AS (
    {listed}
),
counted AS (
    SELECT table_name, count(*) AS table_rows FROM (
        {every_row}
    ) every_row
    GROUP BY table_name
),
acks_ AS (
    SELECT count(*) AS total, sum(CAST(delivered_at_ns IS NOT NULL AS BIGINT)) AS resolved
    FROM {{acks}}
),
unresolvable AS (
    SELECT count(*) AS given_up FROM {{anomalies}}
    WHERE source = 'stomp' AND kind = '{UNMATCHED_AFTER_OVERFLOW}'
),
could_resolve AS (
    SELECT total - given_up AS total, coalesce(resolved, 0) AS resolved
    FROM acks_ CROSS JOIN unresolvable
)
SELECT p.table_name AS table,
       CAST(coalesce(n.table_rows, 0) AS BIGINT) AS table_rows,
       p.run_counter,
       CASE WHEN p.table_name = 'acks' THEN c.total END AS acks_total,
       CASE WHEN p.table_name = 'acks' AND c.total <> 0
            THEN CAST(c.resolved AS DOUBLE) / CAST(c.total AS DOUBLE) END AS resolved_share
FROM listed p
LEFT JOIN counted n ON p.table_name = n.table_name
CROSS JOIN could_resolve c
ORDER BY p.position
"""


def _literal(value: int | None) -> str:
    return "NULL" if value is None else str(int(value))


def _counter(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
