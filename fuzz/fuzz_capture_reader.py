"""Fuzz the capture readers and, behind them, a whole run without Spark: file bytes in.

The input is the capture file itself. Checked for every input: nothing raises; the reader
yields only packets and anomalies, at offsets inside the file, with payloads inside the file
and times an int64 column can hold, and counts every anomaly it yields; reading the file in
splits gives exactly what one pass gives, and the compiled scanner exactly what the pure-Python
reader gives; a file yields packets or anomalies unless it is a
well-formed capture holding no packet; then the per-flow pass over its packets (reassembly,
decoder, session model; `fuzz.offline`) makes rows that convert to the tables' Arrow schemas,
with no null in a non-null column and every stored passcode masked.
"""

from __future__ import annotations

import atexit
import os
import sys
import tempfile
from functools import cache

from hypothesis import strategies as st

from fuzz import harness
from fuzz.offline import assert_passcodes_masked, run_offline
from fuzz.seeds import capture_files
from pipeline.ingest import CaptureAnomaly, CaptureReader, TcpPacket, split_capture
from pipeline.ingest.pcapng import MAX_TS_NS
from pipeline.spark.captures import packets_by_flow, read_paths

MAX_LEN = 1 << 14
SEED_LEN = 6000  # seeds are cut here (a cut file is an interesting input too); runs stay fast


@cache
def _scratch() -> str:
    handle, path = tempfile.mkstemp(prefix="fuzz-capture-", suffix=".pcap")
    os.close(handle)
    atexit.register(os.unlink, path)
    return path


def read_checked(path: str, size: int) -> tuple[list[TcpPacket | CaptureAnomaly], CaptureReader]:
    with CaptureReader(path) as reader:
        items = list(reader)
        for item in items:
            if type(item) is TcpPacket:
                assert 0 <= item.record_offset < item.payload_offset <= size, item
                assert item.payload_offset + item.payload_len <= size, item
                assert 0 <= item.payload_len <= item.wire_len, item
                assert 0 <= item.ts_ns <= MAX_TS_NS, item
                assert 0 <= item.src_port <= 0xFFFF and 0 <= item.dst_port <= 0xFFFF, item
                assert len(reader.payload(item)) == item.payload_len
            else:
                assert type(item) is CaptureAnomaly, item
                assert 0 <= item.offset <= size, item
                assert item.kind and item.detail and ": " not in item.kind, item
    stats = reader.stats
    assert stats.tcp_packets == sum(type(i) is TcpPacket for i in items)
    assert sum(stats.anomalies.values()) == sum(type(i) is CaptureAnomaly for i in items)
    return items, reader


def check(data: bytes) -> None:
    path = _scratch()
    with open(path, "wb") as handle:
        handle.write(data)
    items, reader = read_checked(path, len(data))
    if not items:
        assert reader.format in ("pcap", "pcapng"), "an unknown file yielded no anomaly"
        assert reader.format == "pcapng" or reader.stats.packets or len(data) == 24
    target = 1 + (len(data) * 7919) % 4000
    pieces: list[TcpPacket | CaptureAnomaly] = []
    for split in split_capture(path, target):
        with CaptureReader.from_split(split) as part:
            pieces += list(part)
    assert pieces == items, "splits disagree with one pass"
    compiled = packets_by_flow(read_paths([path], target))
    assert compiled == packets_by_flow(read_paths([path], target, compiled=False)), (
        "the compiled scanner and the pure-Python reader disagree"
    )
    result = run_offline([path], split_bytes=target)
    for row in result.capture_anomalies:
        assert row["file"] == path and 0 <= row["file_offset"] <= len(data), row
    for anomaly in result.tables["anomalies"]:
        assert anomaly["file"] in (path, None), anomaly
    assert_passcodes_masked(result.tables)


def seeds() -> list[bytes]:
    out = [data[:SEED_LEN] for data in capture_files()]
    out += _synthetic()
    return out


def _synthetic() -> list[bytes]:
    """Small generated captures in the shapes the samples lack (pcapng blocks and options, byte
    orders, link types), when the test helpers are importable."""
    try:
        from tests.support import pcapgen as g
    except ImportError:
        return []
    packets = g.generate([g.stomp_conversation(1, messages=2, body_size=300)]).packets
    return [
        g.pcap_bytes(packets, nanos=True, byte_order=">", linktype=g.LINKTYPE_LINUX_SLL2),
        g.pcap_bytes(packets, linktype=g.LINKTYPE_NULL, snaplen=120),
        g.pcapng_bytes(
            packets, interfaces=[g.NgInterface(tsresol=9), g.NgInterface(101)], spread=True
        ),
        g.pcapng_bytes(packets, byte_order=">", comments=True),
        g.pcapng_bytes(packets, simple=True),
    ]


def strategy() -> st.SearchStrategy[bytes]:
    return st.one_of(harness.mutated(seeds()), st.binary(max_size=256))


if __name__ == "__main__":
    sys.exit(harness.main(sys.modules[__name__]))
