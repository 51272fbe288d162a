"""Counters of a run, from the flow pass's file and counter rows and the capture pass's stats."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass(slots=True)
class CaptureSummary:
    """What the capture pass tells the driver, from its stats and anomaly rows (one job)."""

    stats: dict[str, int]  # counters summed over the files, and the capture window
    flow_weights: Counter[str]  # packets of the flows the splits reported (placement)
    anomalies: list[tuple[int, int | None, str]]  # (file_id, record offset, "kind: detail")
    client_randoms: set[bytes]  # of the TLS ClientHellos read (asked for: see read_split)


def capture_summary(packets: DataFrame) -> CaptureSummary:
    """Counters summed over the capture files, with the capture window (``capture_first_ns``,
    ``capture_last_ns``: the first and last TCP packet's times) when there were TCP packets;
    the packets of the flows the splits reported (`pipeline.spark.placement`); and the bad
    records met (one per bad record: bounded by the input's records, never by its bytes)."""
    from pipeline.spark.placement import flow_weights

    totals: Counter[str] = Counter()
    firsts: list[int] = []
    lasts: list[int] = []
    reports = []
    anomalies = []
    randoms: set[bytes] = set()
    side = packets.where("record_type IN ('stats', 'anomaly', 'tls_client_random')")
    for row in side.select("record_type", "file_id", "record_offset", "detail").collect():
        if row.record_type == "anomaly":
            anomalies.append((row.file_id, row.record_offset, row.detail))
            continue
        if row.record_type == "tls_client_random":
            randoms.add(bytes.fromhex(row.detail))
            continue
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
    return CaptureSummary({**totals, **window}, flow_weights(reports), anomalies, randoms)


def flow_output(tagged: DataFrame) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """The files the flow pass wrote, by table, and the run's table counters: rows per table,
    frames by "direction command", the sessions' gap bytes and violations, and the connections
    still open (``open_connections``: state rows carried to the next batch)."""
    import schemas
    from pipeline.spark.flows import COUNTERS_KIND, FILE_KIND

    written: dict[str, list[str]] = {}
    counts: dict[str, Any] = dict.fromkeys(schemas.TABLES, 0)
    by_command: Counter[str] = Counter()
    gap_bytes = violations = carried = 0
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
            carried += seen["carried"]
    counts.update(
        frames_by_command=dict(by_command),
        gap_bytes=gap_bytes,
        violations=violations,
        open_connections=carried,
    )
    return written, counts
