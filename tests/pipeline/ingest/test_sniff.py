from __future__ import annotations

import bz2
import gzip

from pipeline.ingest.sniff import detect_format, unknown_format
from tests.support import pcapgen as g


def test_formats_are_told_apart_by_magic() -> None:
    for nanos in (False, True):
        for order in ("<", ">"):
            data = g.pcap_bytes([], nanos=nanos, byte_order=order)
            assert detect_format(data, len(data)) == "pcap"
    for order in ("<", ">"):
        data = g.pcapng_bytes([], byte_order=order)
        assert detect_format(data, len(data)) == "pcapng"
    assert detect_format(b"abc", 3) == "unknown"
    assert detect_format(b"\x00" * 100, 100) == "unknown"


def test_unknown_format_names_compressed_files() -> None:
    packed = gzip.compress(b"x" * 100)
    assert "gzip" in unknown_format(packed, len(packed)).detail
    packed = bz2.compress(b"x" * 100)
    assert "bzip2" in unknown_format(packed, len(packed)).detail
    other = unknown_format(b"PK\x03\x04rest", 8)
    assert (other.kind, other.offset) == ("unknown_format", 0) and "504b0304" in other.detail
    assert unknown_format(b"ab", 2).kind == "truncated_file"
