"""Phase 1 without Spark: a task's capture split -> Arrow packet rows, anomalies and stats."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.ingest import CaptureAnomaly, CaptureReader, TcpPacket
from pipeline.spark.captures import PACKET_SCHEMA, flow_key, flow_keys, plan_tasks, read_split
from tests.conftest import SAMPLES

MALFORMED = Path(__file__).parents[2] / "data" / "malformed"

ips = st.sampled_from(["10.0.0.1", "10.0.0.10", "10.0.0.2", "::1", "fe80::1", "192.168.1.1"])
ports = st.integers(0, 65535)


@settings(deadline=None)  # the first call loads pyarrow.compute
@given(st.lists(st.tuples(ips, ports, ips, ports), min_size=1, max_size=30))
def test_column_flow_keys_equal_the_row_function(tuples) -> None:
    sip, sport, dip, dport = (list(column) for column in zip(*tuples, strict=True))
    keys = flow_keys(
        pa.array(sip), pa.array(sport, pa.int32()), pa.array(dip), pa.array(dport, pa.int32())
    )
    assert keys.to_pylist() == [flow_key(*t) for t in tuples]


def _rows(path: Path, batch_rows: int) -> list[dict]:
    rows = []
    for task in plan_tasks([str(path)]):
        for batch in read_split(task.file_id, pickle.loads(task.split), batch_rows=batch_rows):
            assert batch.schema == PACKET_SCHEMA
            rows += batch.to_pylist()
    return rows


def test_rows_hold_every_packet_the_reader_yields_and_one_stats_row() -> None:
    path = SAMPLES / "activemq-queues-acks.pcap"
    rows = _rows(path, batch_rows=7)
    packets = [item for item in CaptureReader(str(path)) if type(item) is TcpPacket]
    got = [r for r in rows if r["record_type"] == "packet"]
    assert len(got) == len(packets)
    for row, packet in zip(got, packets, strict=True):
        assert row["flow_key"] == flow_key(
            packet.src_ip, packet.src_port, packet.dst_ip, packet.dst_port
        )
        assert all(row[name] == getattr(packet, name) for name in TcpPacket.__slots__)
    (stats,) = [r for r in rows if r["record_type"] == "stats"]
    detail = json.loads(stats["detail"])
    assert detail["tcp_packets"] == len(packets)
    times = [p.ts_ns for p in packets]
    assert (detail["first_ts_ns"], detail["last_ts_ns"]) == (min(times), max(times))


def test_a_file_without_tcp_packets_has_no_capture_window() -> None:
    rows = _rows(MALFORMED / "unknown-linktype.pcap", batch_rows=65536)
    (stats,) = [r for r in rows if r["record_type"] == "stats"]
    detail = json.loads(stats["detail"])
    assert detail["tcp_packets"] == 0
    assert detail["first_ts_ns"] is None and detail["last_ts_ns"] is None


def test_anomalies_keep_their_offset_and_detail() -> None:
    path = MALFORMED / "corrupt-record-length.pcap"
    anomalies = [item for item in CaptureReader(str(path)) if type(item) is CaptureAnomaly]
    assert anomalies
    rows = [r for r in _rows(path, batch_rows=65536) if r["record_type"] == "anomaly"]
    assert [(r["record_offset"], r["detail"]) for r in rows] == [
        (a.offset, f"{a.kind}: {a.detail}") for a in anomalies
    ]
    assert all(r["flow_key"] is None and r["file_id"] == 0 for r in rows)
