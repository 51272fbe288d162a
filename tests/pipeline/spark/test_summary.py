"""pipeline/spark/summary.py: a run's counters from the capture pass's side rows (stats,
anomalies, TLS randoms) and the flow pass's file and counters rows, on small frames of those
rows and on a real capture."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dpkt
import pyarrow as pa
import pytest

import schemas
from pipeline.ingest.records import CaptureStats
from pipeline.spark.captures import DEFAULT_SPLIT_BYTES, PIECE_SCHEMA, packets_frame
from pipeline.spark.flows import (
    COUNTERS_KIND,
    FILE_KIND,
    STATE_KIND,
    RunCounters,
    output_schema,
)
from pipeline.spark.summary import capture_summary, flow_output
from tests.support.paths import DATA

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

REAL_CAPTURE = DATA / "captures" / "real_lo_ethernet.pcap"


def _stats(
    first_ns: int | None = None,
    last_ns: int | None = None,
    flows: list[list[object]] | None = None,
    **counters: Any,
) -> dict[str, Any]:
    """A split's stats row, as `read_split` writes it."""
    stats = asdict(CaptureStats(**counters))
    return {
        "record_type": "stats",
        "detail": json.dumps(
            {**stats, "first_ts_ns": first_ns, "last_ts_ns": last_ns, "flows": flows or []}
        ),
    }


def _side(record_type: str, detail: str, file_id: int = 0, offset: int | None = None) -> dict:
    return {
        "record_type": record_type,
        "file_id": file_id,
        "record_offset": offset,
        "detail": detail,
    }


def _packets(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    return spark.createDataFrame(pa.Table.from_pylist(rows, schema=PIECE_SCHEMA))


def _flow_rows(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    return spark.createDataFrame(pa.Table.from_pylist(rows, schema=output_schema()))


def test_counters_are_summed_over_the_splits_and_the_window_spans_them(spark: SparkSession) -> None:
    rows = [
        _stats(
            1_000,
            5_000,
            packets=10,
            tcp_packets=7,
            non_tcp_packets={"not_tcp": 2, "non_ip": 1},
            snaplen_cut=1,
            bytes=900,
            payload_bytes=400,
            anomalies={"truncated_record": 1},
        ),
        _stats(500, 3_000, packets=4, tcp_packets=4, bytes=300, payload_bytes=100),
        # a split without TCP packets: its counters count, it widens no window
        _stats(packets=3, non_tcp_packets={"not_tcp": 3}, bytes=90, anomalies={"x": 1, "y": 2}),
        # a piece row is no counter
        {"record_type": "piece", "flow_key": "k", "file_id": 0, "packet_count": 99},
    ]
    stats = capture_summary(_packets(spark, rows)).stats
    assert stats == {
        "packets": 17,
        "tcp_packets": 11,
        "snaplen_cut": 1,
        "bytes": 1_290,
        "payload_bytes": 500,
        "non_tcp_packets": 6,
        "capture_anomalies": 4,
        "capture_first_ns": 500,
        "capture_last_ns": 5_000,
    }


def test_a_batch_without_tcp_packets_has_counters_but_no_capture_window(
    spark: SparkSession,
) -> None:
    rows = [_stats(packets=2, non_tcp_packets={"unknown_linktype": 2}), _stats()]
    summary = capture_summary(_packets(spark, rows))
    assert summary.stats == {
        "packets": 2,
        "tcp_packets": 0,
        "snaplen_cut": 0,
        "bytes": 0,
        "payload_bytes": 0,
        "non_tcp_packets": 2,
        "capture_anomalies": 0,
    }
    assert summary.flow_weights == Counter()
    assert summary.anomalies == [] and summary.client_randoms == set()


def test_bad_records_tls_randoms_and_flow_reports_are_gathered(spark: SparkSession) -> None:
    random_a, random_b = bytes(range(32)), bytes(range(32, 64))
    rows = [
        _side("anomaly", "truncated_record: 12 bytes short", file_id=0, offset=4_096),
        _side("anomaly", "bad_header: no pcap magic", file_id=1, offset=None),
        _side("tls_client_random", random_a.hex(), file_id=0, offset=80),
        _side("tls_client_random", random_b.hex(), file_id=1, offset=96),
        _side("tls_client_random", random_a.hex(), file_id=1, offset=200),  # in two files
        _stats(1, 2, flows=[["flow-a", 5], ["flow-b", 2]], packets=7, tcp_packets=7),
        _stats(3, 4, flows=[["flow-a", 3], ["flow-c", 1]], packets=4, tcp_packets=4),
    ]
    summary = capture_summary(_packets(spark, rows))
    assert Counter(summary.anomalies) == Counter(
        [(0, 4_096, "truncated_record: 12 bytes short"), (1, None, "bad_header: no pcap magic")]
    )
    assert summary.client_randoms == {random_a, random_b}
    assert summary.flow_weights == Counter({"flow-a": 8, "flow-b": 2, "flow-c": 1})
    assert summary.stats["tcp_packets"] == 11  # side rows are no counters


def _record_times_ns(path: Path) -> list[int]:
    with path.open("rb") as capture:
        return [round(ts * 1e6) * 1_000 for ts, _buf in dpkt.pcap.Reader(capture)]


@pytest.mark.parametrize(
    "split_bytes", [DEFAULT_SPLIT_BYTES, 4_096], ids=["one-split", "many-splits"]
)
def test_a_real_capture_sums_to_its_own_packets_however_it_is_split(
    spark: SparkSession, split_bytes: int
) -> None:
    summary = capture_summary(packets_frame(spark, [str(REAL_CAPTURE)], split_bytes))
    times = _record_times_ns(REAL_CAPTURE)
    stats = summary.stats
    assert stats["packets"] == stats["tcp_packets"] == len(times) == 84
    assert stats["non_tcp_packets"] == stats["capture_anomalies"] == stats["snaplen_cut"] == 0
    assert stats["bytes"] == REAL_CAPTURE.stat().st_size - 24 - 16 * len(times)
    assert (stats["capture_first_ns"], stats["capture_last_ns"]) == (min(times), max(times))
    assert sum(summary.flow_weights.values()) == 84
    assert summary.anomalies == [] and summary.client_randoms == set()


def _file(table: str, path: str, rows: int) -> dict[str, Any]:
    return {"kind": FILE_KIND, "table": table, "path": path, "rows": rows}


def _counters(frames: list[str], gap_bytes: int, violations: int, carried: int) -> dict:
    counted = RunCounters(Counter(frames), gap_bytes, violations, carried)
    return {"kind": COUNTERS_KIND, "counters": counted.to_json()}


def test_flow_output_lists_the_files_by_table_and_sums_the_tasks_counters(
    spark: SparkSession,
) -> None:
    rows = [
        _file("frames", "frames/part-0.parquet", 5),
        _file("sessions", "sessions/part-0.parquet", 1),
        _counters(["c2s CONNECT", "s2c CONNECTED", "c2s SEND"], 0, 1, 0),
        _file("frames", "frames/part-1.parquet", 3),
        _counters(["c2s SEND", "c2s SEND", "s2c MESSAGE"], 120, 2, 1),
        # the state of a connection still open: carried, not counted here
        {"kind": STATE_KIND, "flow_key": "k", "state": b"\x00", "record_offset": 0},
    ]
    written, counts = flow_output(_flow_rows(spark, rows))
    assert {table: sorted(paths) for table, paths in written.items()} == {
        "frames": ["frames/part-0.parquet", "frames/part-1.parquet"],
        "sessions": ["sessions/part-0.parquet"],
    }
    assert {t: counts[t] for t in schemas.TABLES} == {
        **dict.fromkeys(schemas.TABLES, 0),
        "frames": 8,
        "sessions": 1,
    }
    assert counts["frames_by_command"] == {
        "c2s CONNECT": 1,
        "s2c CONNECTED": 1,
        "c2s SEND": 3,
        "s2c MESSAGE": 1,
    }
    assert (counts["gap_bytes"], counts["violations"], counts["open_connections"]) == (120, 3, 1)


def test_a_flow_pass_that_wrote_nothing_counts_nothing_for_every_table(spark: SparkSession) -> None:
    written, counts = flow_output(_flow_rows(spark, [_counters([], 0, 0, 0)]))
    assert written == {}
    assert counts == {
        **dict.fromkeys(schemas.TABLES, 0),
        "frames_by_command": {},
        "gap_bytes": 0,
        "violations": 0,
        "open_connections": 0,
    }
