"""Capture readers: pcap / pcapng files -> TCP packet records (payloads stay in the file).

Public API:
    CaptureReader(path, start=None, end=None, *, context=None)
        iterate -> TcpPacket | CaptureAnomaly; .stats (CaptureStats); .payload(packet) -> bytes;
        .format; .comments; close() / context manager
    CaptureReader.from_split(split)
    iter_capture(path, start=None, end=None) -> Iterator[TcpPacket | CaptureAnomaly]
    split_capture(path, target_bytes) -> list[CaptureSplit]   (picklable, carries its context)
"""

from __future__ import annotations

from pipeline.ingest.pcap import PcapHeader
from pipeline.ingest.pcapng_blocks import Interface, PcapngContext
from pipeline.ingest.reader import CaptureReader, iter_capture
from pipeline.ingest.records import (
    ACK,
    FIN,
    PSH,
    RST,
    SYN,
    URG,
    CaptureAnomaly,
    CaptureStats,
    TcpPacket,
)
from pipeline.ingest.split import CaptureSplit, split_capture

__all__ = [
    "ACK",
    "FIN",
    "PSH",
    "RST",
    "SYN",
    "URG",
    "CaptureAnomaly",
    "CaptureReader",
    "CaptureSplit",
    "CaptureStats",
    "Interface",
    "PcapHeader",
    "PcapngContext",
    "TcpPacket",
    "iter_capture",
    "split_capture",
]
