"""Phase 1 without Spark: a task's capture split -> Arrow flow pieces, anomalies and stats."""

from __future__ import annotations

import json
import pickle
from collections import Counter
from pathlib import Path

import numpy as np

from pipeline.ingest import CaptureAnomaly, CaptureReader, TcpPacket
from pipeline.spark.captures import (
    MAX_TASK_SPLITS,
    PIECE_SCHEMA,
    capture_tasks,
    packets_by_flow,
    plan_tasks,
    read_paths,
    read_split,
    split_groups,
)
from pipeline.spark.pieces import flow_key, key_ends, unpack
from tests.support.paths import SAMPLES

MALFORMED = Path(__file__).parents[2] / "data" / "malformed"


def _rows(path: Path, piece_packets: int) -> list[dict]:
    rows = []
    for task in plan_tasks([str(path)]):
        for batch in read_split(task.file_id, pickle.loads(task.split), piece_packets):
            assert batch.schema == PIECE_SCHEMA
            rows += batch.to_pylist()
    return rows


def _packets_of(rows: list[dict]) -> list[TcpPacket]:
    """The pieces unpacked back into packets, in file order."""
    packets = []
    for row in rows:
        if row["record_type"] != "piece":
            continue
        ip_a, port_a, ip_b, port_b = key_ends(row["flow_key"])
        records = unpack(row["packets"], row["packet_count"])
        assert len(records) == row["packet_count"]
        first = int(np.argmin(records["ts_ns"]))
        assert (row["ts_ns"], row["record_offset"]) == (
            records["ts_ns"][first],
            records["record_offset"][first],
        )
        for r in records.tolist():
            ts, p_off, r_off, seq, ack, p_len, w_len, window, flags, reverse, _ = r
            ends = (ip_b, port_b, ip_a, port_a) if reverse else (ip_a, port_a, ip_b, port_b)
            packets.append(
                TcpPacket(ts, *ends, seq, ack, flags, window, p_off, p_len, w_len, r_off)
            )
    return sorted(packets, key=lambda p: p.record_offset)


def test_pieces_hold_every_packet_the_reader_yields_and_one_stats_row() -> None:
    path = SAMPLES / "activemq-queues-acks.pcap"
    packets = [item for item in CaptureReader(str(path)) if type(item) is TcpPacket]
    for piece_packets in (7, 131_072):
        rows = _rows(path, piece_packets)
        assert _packets_of(rows) == packets
        pieces = [r for r in rows if r["record_type"] == "piece"]
        flows = {flow_key(p.src_ip, p.src_port, p.dst_ip, p.dst_port) for p in packets}
        assert {r["flow_key"] for r in pieces} == flows
        if piece_packets > len(packets):  # one piece a flow
            assert len(pieces) == len(flows)
        (stats,) = [r for r in rows if r["record_type"] == "stats"]
        detail = json.loads(stats["detail"])
        assert detail["tcp_packets"] == len(packets)
        times = [p.ts_ns for p in packets]
        assert (detail["first_ts_ns"], detail["last_ts_ns"]) == (min(times), max(times))
        by_flow = Counter(flow_key(p.src_ip, p.src_port, p.dst_ip, p.dst_port) for p in packets)
        assert {key: count for key, count in detail["flows"]} == by_flow  # few flows: all


def test_a_file_without_tcp_packets_has_no_capture_window() -> None:
    rows = _rows(MALFORMED / "unknown-linktype.pcap", 65536)
    (stats,) = [r for r in rows if r["record_type"] == "stats"]
    detail = json.loads(stats["detail"])
    assert detail["tcp_packets"] == 0
    assert detail["first_ts_ns"] is None and detail["last_ts_ns"] is None


def test_anomalies_keep_their_offset_and_detail() -> None:
    path = MALFORMED / "corrupt-record-length.pcap"
    anomalies = [item for item in CaptureReader(str(path)) if type(item) is CaptureAnomaly]
    assert anomalies
    rows = [r for r in _rows(path, 65536) if r["record_type"] == "anomaly"]
    assert [(r["record_offset"], r["detail"]) for r in rows] == [
        (a.offset, f"{a.kind}: {a.detail}") for a in anomalies
    ]
    assert all(r["flow_key"] is None and r["file_id"] == 0 for r in rows)


def test_split_groups_take_every_split_once_in_order_in_near_equal_groups() -> None:
    for count in range(0, 40):
        for most in (1, 2, 4, 7, 64):
            groups = split_groups(count, most)
            assert [i for group in groups for i in group] == list(range(count))
            assert len(groups) == min(count, most)
            assert max(map(len, groups), default=0) - min(map(len, groups), default=0) <= 1


def test_capture_tasks_two_a_core_in_whole_waves_each_reading_a_bounded_number_of_splits() -> None:
    assert capture_tasks(20, 2) == 4  # 2.26 GB of 120 MB files
    assert capture_tasks(40, 2) == 8  # one 4.69 GB connection
    assert capture_tasks(3, 2) == 3
    assert capture_tasks(0, 2) == 0
    for splits in range(1, 300):
        for cores in (1, 2, 3, 8):
            tasks = capture_tasks(splits, cores)
            assert 1 <= tasks <= splits
            assert -(-splits // tasks) <= MAX_TASK_SPLITS
            assert tasks == splits or tasks % cores == 0


def test_clienthello_randoms_are_found_when_asked(tmp_path: Path) -> None:
    from pipeline.net import Direction
    from tests.support.tls_pair import converse, write_capture

    talks = [converse(tmp_path, exchanges=[(Direction.C2S, b"CONNECT\n\n\x00")]) for _ in range(2)]
    paths = [str(write_capture(t, tmp_path / f"tls-{n}.pcap")) for n, t in enumerate(talks)]
    randoms = {line.split()[1] for t in talks for line in t.keylog.splitlines() if line[:1] != "#"}
    _, side = packets_by_flow(read_paths(paths, tls_randoms=True))
    found = [detail for kind, _, offset, detail in side if kind == "tls_client_random"]
    assert sorted(found) == sorted(randoms)
    _, side = packets_by_flow(read_paths(paths))
    assert not [row for row in side if row[0] == "tls_client_random"]
    _, side = packets_by_flow(
        read_paths([str(SAMPLES / "activemq-queues-acks.pcap")], tls_randoms=True)
    )
    assert not [row for row in side if row[0] == "tls_client_random"]
