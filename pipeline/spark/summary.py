"""Counters of a run, from the flow pass's file and counter rows and the capture pass's stats."""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def capture_stats(packets: DataFrame) -> tuple[dict[str, int], Counter[str]]:
    """Counters summed over the capture files, with the capture window (``capture_first_ns``,
    ``capture_last_ns``: the first and last TCP packet's times) when there were TCP packets;
    and the packets of the flows the splits reported (`pipeline.spark.placement`)."""
    from pipeline.spark.placement import flow_weights

    totals: Counter[str] = Counter()
    firsts: list[int] = []
    lasts: list[int] = []
    reports = []
    for row in packets.where("record_type = 'stats'").select("detail").collect():
        stats = json.loads(row.detail)
        for key in ("packets", "tcp_packets", "snaplen_cut", "bytes", "payload_bytes"):
            totals[key] += stats.get(key, 0)
        totals["non_tcp_packets"] += sum(stats.get("non_tcp_packets", {}).values())
        totals["capture_anomalies"] += sum(stats.get("anomalies", {}).values())
        if stats.get("first_ts_ns") is not None:
            firsts.append(stats["first_ts_ns"])
            lasts.append(stats["last_ts_ns"])
        reports.append(stats.get("flows", []))
    window = {"capture_first_ns": min(firsts), "capture_last_ns": max(lasts)} if firsts else {}
    return {**totals, **window}, flow_weights(reports)


def flow_output(tagged: DataFrame) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """The files the flow pass wrote, by table, and the run's table counters: rows per table,
    frames by "direction command", and the sessions' gap bytes and violations."""
    import schemas
    from pipeline.spark.flows import COUNTERS_KIND, FILE_KIND

    written: dict[str, list[str]] = {}
    counts: dict[str, Any] = dict.fromkeys(schemas.TABLES, 0)
    by_command: Counter[str] = Counter()
    gap_bytes = violations = 0
    found = tagged.where(f"kind IN ('{FILE_KIND}', '{COUNTERS_KIND}')")
    for row in found.select("kind", "table", "path", "rows", "counters").collect():
        if row.kind == FILE_KIND:
            written.setdefault(row.table, []).append(row.path)
            counts[row.table] += row.rows
        else:
            seen = json.loads(row.counters)
            by_command.update(seen["frames_by_command"])
            gap_bytes += seen["gap_bytes"]
            violations += seen["violations"]
    counts.update(frames_by_command=dict(by_command), gap_bytes=gap_bytes, violations=violations)
    return written, counts
