"""Counters of a run, computed from the tagged flow output and the packet rows."""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def capture_stats(packets: DataFrame) -> dict[str, int]:
    """Counters summed over the capture files, and the capture window (``capture_first_ns``,
    ``capture_last_ns``: the first and last TCP packet's times) when there were TCP packets."""
    totals: Counter[str] = Counter()
    firsts: list[int] = []
    lasts: list[int] = []
    for row in packets.where("record_type = 'stats'").select("detail").collect():
        stats = json.loads(row.detail)
        for key in ("packets", "tcp_packets", "snaplen_cut", "bytes", "payload_bytes"):
            totals[key] += stats.get(key, 0)
        totals["non_tcp_packets"] += sum(stats.get("non_tcp_packets", {}).values())
        totals["capture_anomalies"] += sum(stats.get("anomalies", {}).values())
        if stats.get("first_ts_ns") is not None:
            firsts.append(stats["first_ts_ns"])
            lasts.append(stats["last_ts_ns"])
    window = {"capture_first_ns": min(firsts), "capture_last_ns": max(lasts)} if firsts else {}
    return {**totals, **window}


def table_counts(tables: dict[str, DataFrame]) -> dict[str, Any]:
    from pyspark.sql import functions as F

    counts: dict[str, Any] = {name: df.count() for name, df in tables.items()}
    frames = tables["frames"].groupBy("direction", "command").count().collect()
    counts["frames_by_command"] = {f"{r.direction} {r.command}": r["count"] for r in frames}
    sessions = (
        tables["sessions"]
        .agg(
            F.coalesce(F.sum("gap_bytes"), F.lit(0)).alias("gap_bytes"),
            F.coalesce(F.sum("violations"), F.lit(0)).alias("violations"),
        )
        .first()
    )
    counts["gap_bytes"] = sessions.gap_bytes
    counts["violations"] = sessions.violations
    return counts
