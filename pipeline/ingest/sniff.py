"""Capture format detection by magic number."""

from __future__ import annotations

from pipeline.ingest.pcap import is_pcap_magic
from pipeline.ingest.pcapng_blocks import is_pcapng_magic
from pipeline.ingest.records import CaptureAnomaly
from pipeline.ingest.types import Buffer

_OTHER_MAGICS = {
    b"\x1f\x8b": "gzip-compressed",
    b"BZ": "bzip2-compressed",
    b"\xfd7zXZ": "xz-compressed",
    b"\x28\xb5\x2f\xfd": "zstd-compressed",
}


def detect_format(buf: Buffer, size: int) -> str:
    """ "pcap", "pcapng" or "unknown"."""
    if is_pcapng_magic(buf, size):
        return "pcapng"
    if is_pcap_magic(buf, size):
        return "pcap"
    return "unknown"


def unknown_format(buf: Buffer, size: int) -> CaptureAnomaly:
    """The anomaly for a file that is neither pcap nor pcapng."""
    if size < 4:
        return CaptureAnomaly("truncated_file", 0, f"{size} bytes, too short for a capture")
    head = bytes(buf[:8])
    for magic, name in _OTHER_MAGICS.items():
        if head.startswith(magic):
            return CaptureAnomaly("unknown_format", 0, f"{name} file, not pcap/pcapng")
    return CaptureAnomaly("unknown_format", 0, f"magic {head[:4].hex()} is neither pcap nor pcapng")
