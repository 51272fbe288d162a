from __future__ import annotations

import pickle

from pipeline.ingest.records import CaptureAnomaly, CaptureStats, TcpPacket


def test_stats_count_reasons_and_anomalies_and_merge() -> None:
    a = CaptureStats(packets=3, tcp_packets=1, bytes=100, payload_bytes=40)
    a.skip("not_tcp")
    a.skip("not_tcp")
    a.note(CaptureAnomaly("snaplen_cut", 10, ""))
    b = CaptureStats(packets=2, tcp_packets=2, snaplen_cut=1, bytes=50, payload_bytes=20)
    b.skip("non_ip")
    b.note(CaptureAnomaly("snaplen_cut", 99, ""))
    a.merge(b)
    assert a == CaptureStats(
        packets=5,
        tcp_packets=3,
        non_tcp_packets={"not_tcp": 2, "non_ip": 1},
        snaplen_cut=1,
        bytes=150,
        payload_bytes=60,
        anomalies={"snaplen_cut": 2},
    )


def test_records_pickle_for_shipping_between_processes() -> None:
    packet = TcpPacket(1, "::1", 2, "::2", 3, 4, 5, 0x18, 7, 8, 9, 10, 11)
    anomaly = CaptureAnomaly("bad_ip_header", 5, "IPv4 version/ihl byte 0x43")
    assert pickle.loads(pickle.dumps(packet)) == packet
    assert pickle.loads(pickle.dumps(anomaly)) == anomaly
