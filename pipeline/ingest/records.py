"""Records produced by the capture readers: TCP packets, anomalies and running counters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import final

from pipeline.net import ACK, FIN, PSH, RST, SYN, URG

__all__ = ["ACK", "FIN", "PSH", "RST", "SYN", "URG", "CaptureAnomaly", "CaptureStats", "TcpPacket"]


@final  # readers test `type(x) is TcpPacket`; final lets type checkers narrow on that
@dataclass(slots=True)
class TcpPacket:
    """One captured TCP segment; the payload stays in the file and is read on demand."""

    ts_ns: int  # capture time, ns since the epoch (interface resolution and offset applied)
    src_ip: str  # IPv6 as compressed text
    src_port: int
    dst_ip: str
    dst_port: int
    seq: int
    ack: int
    flags: int  # TCP flags byte: FIN=1 SYN=2 RST=4 PSH=8 ACK=16 URG=32
    window: int
    payload_offset: int  # absolute offset of the TCP payload inside the capture file
    payload_len: int  # payload bytes present in the file
    wire_len: int  # payload length according to the IP header (> payload_len when cut)
    record_offset: int  # offset of the packet record / block in the file


@dataclass(slots=True, frozen=True)
class CaptureAnomaly:
    """Bad input found while reading; reported instead of raised."""

    kind: str
    offset: int
    detail: str


@dataclass(slots=True)
class CaptureStats:
    """Counters filled while a reader walks its byte range."""

    packets: int = 0  # packet records / blocks seen
    tcp_packets: int = 0
    non_tcp_packets: dict[str, int] = field(default_factory=dict)  # reason -> count
    snaplen_cut: int = 0  # records whose captured length is below the original length
    bytes: int = 0  # captured packet bytes (record data, link header included)
    payload_bytes: int = 0  # TCP payload bytes present in the file
    anomalies: dict[str, int] = field(default_factory=dict)  # kind -> count

    def skip(self, reason: str) -> None:
        self.non_tcp_packets[reason] = self.non_tcp_packets.get(reason, 0) + 1

    def note(self, anomaly: CaptureAnomaly) -> None:
        self.anomalies[anomaly.kind] = self.anomalies.get(anomaly.kind, 0) + 1

    def merge(self, other: CaptureStats) -> None:
        """Add another reader's counters (e.g. the splits of one file) into this one."""
        self.packets += other.packets
        self.tcp_packets += other.tcp_packets
        self.snaplen_cut += other.snaplen_cut
        self.bytes += other.bytes
        self.payload_bytes += other.payload_bytes
        for reason, count in other.non_tcp_packets.items():
            self.non_tcp_packets[reason] = self.non_tcp_packets.get(reason, 0) + count
        for kind, count in other.anomalies.items():
            self.anomalies[kind] = self.anomalies.get(kind, 0) + count
