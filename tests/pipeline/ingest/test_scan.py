"""The compiled scanner (`pipeline/ingest/_scan.pyx`) against the pure-Python reader it stands in
for: the same packets, flows, anomalies and counters on every capture the repository holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from fuzz import fuzz_capture_reader
from pipeline.compiled import PURE_PYTHON_VARIABLE
from pipeline.ingest import CaptureReader
from pipeline.ingest.scan import new_scanner
from pipeline.spark.captures import packets_by_flow, read_paths
from tests.support import pcapgen as g
from tests.support.paths import REPO, REPO_CAPTURES


def test_the_install_builds_it() -> None:
    assert new_scanner() is not None


def test_pure_python_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PURE_PYTHON_VARIABLE, "1")
    assert new_scanner() is None


def same_reading(path: Path, split_bytes: int) -> None:
    compiled = packets_by_flow(read_paths([str(path)], split_bytes))
    pure = packets_by_flow(read_paths([str(path)], split_bytes, compiled=False))
    assert compiled == pure


@pytest.mark.parametrize("path", REPO_CAPTURES, ids=lambda p: str(p.relative_to(REPO)))
def test_same_as_pure_python(path: Path) -> None:
    same_reading(path, 1 << 26)
    same_reading(path, 1 + path.stat().st_size // 3)  # splits that start mid-file


def test_same_as_pure_python_on_the_fuzz_seeds(tmp_path: Path) -> None:
    for index, seed in enumerate(fuzz_capture_reader.seeds()):
        path = tmp_path / f"seed-{index}.pcap"
        path.write_bytes(seed)
        same_reading(path, 1 << 26)


def test_scans_the_common_shapes(tmp_path: Path) -> None:
    """Every link type on the fast route, both byte orders, IPv6: all packets scanned."""
    conversation = g.generate([g.stomp_conversation(1, messages=3, body_size=200)]).packets
    v6 = g.generate([g.stomp_conversation(1, messages=3, body_size=200, ipv6=True)]).packets
    files = {
        "ethernet.pcap": g.pcap_bytes(conversation),
        "sll2-be-nanos.pcap": g.pcap_bytes(
            conversation, nanos=True, byte_order=">", linktype=g.LINKTYPE_LINUX_SLL2
        ),
        "null.pcap": g.pcap_bytes(conversation, linktype=g.LINKTYPE_NULL),
        "sll.pcap": g.pcap_bytes(conversation, linktype=g.LINKTYPE_LINUX_SLL),
        "raw-v6.pcap": g.pcap_bytes(v6, linktype=g.LINKTYPE_RAW),
        "v6.pcap": g.pcap_bytes(v6),
        "two-interfaces.pcapng": g.pcapng_bytes(
            conversation, interfaces=[g.NgInterface(tsresol=9), g.NgInterface(101)], spread=True
        ),
        "be.pcapng": g.pcapng_bytes(conversation, byte_order=">"),
    }
    for name, data in files.items():
        path = tmp_path / name
        path.write_bytes(data)
        scanner = new_scanner()
        assert scanner is not None
        with CaptureReader(str(path), scanner=scanner) as reader:
            items = list(reader.scan())
        assert items and all(item is scanner for item in items), name
        assert reader.stats.tcp_packets == len(conversation if "v6" not in name else v6), name
        same_reading(path, 1 << 26)


def test_stops_at_what_it_does_not_take(tmp_path: Path) -> None:
    """Packets cut by the snapshot length, VLAN tags, simple packet blocks, pcapng comments and
    clocks with an offset go to the pure reader, in order."""
    conversation = g.generate([g.stomp_conversation(1, messages=3, body_size=300)]).packets
    for name, data in {
        "cut.pcap": g.pcap_bytes(conversation, linktype=g.LINKTYPE_NULL, snaplen=120),
        "comments.pcapng": g.pcapng_bytes(conversation, comments=True),
        "vlan.pcap": g.pcap_bytes(conversation, vlans=(100,)),
        "simple-blocks.pcapng": g.pcapng_bytes(conversation, simple=True),
        "tsoffset.pcapng": g.pcapng_bytes(conversation, interfaces=[g.NgInterface(tsoffset_s=5)]),
    }.items():
        path = tmp_path / name
        path.write_bytes(data)
        scanner = new_scanner()
        with CaptureReader(str(path), scanner=scanner) as reader:
            items = list(reader.scan())
        assert any(item is not scanner for item in items), name
        same_reading(path, 1 << 26)


def test_clocks_of_every_resolution(tmp_path: Path) -> None:
    conversation = g.generate([g.stomp_conversation(1, messages=2, body_size=100)]).packets
    for tsresol in (0x80 | 30, 0x80 | 10, 3, 7):  # 2^-30 s, 2^-10 s, ms, 100 ns
        path = tmp_path / f"tsresol-{tsresol}.pcapng"
        path.write_bytes(g.pcapng_bytes(conversation, interfaces=[g.NgInterface(tsresol=tsresol)]))
        same_reading(path, 1 << 26)
