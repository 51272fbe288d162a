from __future__ import annotations

import pickle
import struct
from pathlib import Path

import pytest

from pipeline.ingest.pcapng_blocks import PcapngContext
from pipeline.ingest.reader import CaptureReader
from pipeline.ingest.records import CaptureStats, TcpPacket
from pipeline.ingest.scan import compiled_walks
from pipeline.ingest.split import CaptureSplit, split_capture
from tests.support import pcapgen as g
from tests.support.paths import REPO, REPO_CAPTURES


def capture() -> g.SyntheticCapture:
    convs = [g.stomp_conversation(i, messages=6, body_size=2500) for i in range(3)]
    return g.generate(convs)


def block_offsets(data: bytes, byte_order: str) -> list[int]:
    out, off = [], 0
    while off < len(data):
        out.append(off)
        off += struct.unpack_from(byte_order + "I", data, off + 4)[0]
    return out


def whole(path: Path) -> tuple[list, CaptureStats]:
    with CaptureReader(str(path)) as reader:
        return list(reader), reader.stats


def by_splits(splits: list[CaptureSplit]) -> tuple[list, CaptureStats]:
    items: list = []
    stats = CaptureStats()
    for split in splits:
        split = pickle.loads(pickle.dumps(split))  # as shipped to another task
        with CaptureReader.from_split(split) as reader:
            items += list(reader)
            stats.merge(reader.stats)
    return items, stats


def assert_same_as_whole(path: Path, target: int, minimum_splits: int) -> None:
    splits = split_capture(str(path), target)
    assert len(splits) >= minimum_splits
    assert splits[0].start == 0 and splits[-1].end == path.stat().st_size
    assert all(a.end == b.start for a, b in zip(splits, splits[1:], strict=False))
    expected_items, expected_stats = whole(path)
    items, stats = by_splits(splits)
    assert items == expected_items
    assert stats == expected_stats


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_splits_read_back_exactly_the_whole_file(tmp_path: Path, fmt: str) -> None:
    packets = capture().packets
    if fmt == "pcap":
        path = g.write_pcap(tmp_path / "x.pcap", packets, nanos=True, byte_order=">")
    else:
        interfaces = [g.NgInterface(tsresol=6), g.NgInterface(g.LINKTYPE_LINUX_SLL, tsresol=9)]
        path = g.write_pcapng(tmp_path / "x.pcapng", packets, interfaces=interfaces, spread=True)
    assert_same_as_whole(path, 20_000, 5)


def split_both_ways(path: Path, target: int) -> list[CaptureSplit]:
    """The splits with the compiled walk, checked against the walk of every header in Python."""
    splits = split_capture(str(path), target)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("pipeline.ingest.split.compiled_walks", lambda: None)
        assert split_capture(str(path), target) == splits
    return splits


@pytest.mark.parametrize("path", REPO_CAPTURES, ids=lambda p: str(p.relative_to(REPO)))
def test_the_compiled_walk_cuts_where_the_python_walk_does(path: Path) -> None:
    assert compiled_walks() is not None
    size = path.stat().st_size
    for target in (64, 1_000, size // 3 + 1):
        split_both_ways(path, target)


def test_split_of_a_corrupt_pcap_agrees_with_the_whole_read(tmp_path: Path) -> None:
    data = bytearray(g.pcap_bytes(capture().packets))
    records = [24]
    while records[-1] < len(data):
        records.append(records[-1] + 16 + struct.unpack_from("<I", data, records[-1] + 8)[0])
    for n in (5, 40, 80):  # smash record headers
        data[records[n] : records[n] + 40] = b"\xff" * 40
    path = tmp_path / "bad.pcap"
    path.write_bytes(bytes(data[:-100]))
    items, _ = whole(path)
    anomalies = [(i.kind, i.offset) for i in items if not isinstance(i, TcpPacket)]
    assert anomalies == [
        ("bad_record_length", records[5]),
        ("bad_record_length", records[40]),
        ("bad_record_length", records[80]),
        ("truncated_file", records[-3]),  # the cut falls inside this record
    ]
    for target in (3_000, 7_777, 25_000):
        assert_same_as_whole(path, target, 2)
    for target in (100, 3_000, 7_777):
        split_both_ways(path, target)


def test_split_of_a_corrupt_multi_section_pcapng_agrees(tmp_path: Path) -> None:
    packets = capture().packets
    half = len(packets) // 2
    first = g.pcapng_bytes(packets[:half], interfaces=[g.NgInterface(tsresol=9)])
    second = g.pcapng_bytes(
        packets[half:], byte_order=">", interfaces=[g.NgInterface(g.LINKTYPE_RAW, tsresol=3)]
    )
    data = bytearray(first + second)
    blocks = block_offsets(first, "<") + [len(first) + o for o in block_offsets(second, ">")]
    struct.pack_into("<I", data, blocks[12] + 4, 0x7FFF_0000)  # a block length, section 1
    data[blocks[-20] : blocks[-20] + 10] = b"\x00" * 10  # a block header, section 2
    path = tmp_path / "bad.pcapng"
    path.write_bytes(bytes(data))
    items, _ = whole(path)
    anomalies = [(i.kind, i.offset) for i in items if not isinstance(i, TcpPacket)]
    assert anomalies == [("bad_block_length", blocks[12]), ("bad_block_length", blocks[-20])]
    for target in (4_000, 15_000):
        assert_same_as_whole(path, target, 3)
    for target in (100, 4_000, 15_000):
        split_both_ways(path, target)


def test_simple_packet_blocks_at_a_split_start_keep_the_time_before_them(tmp_path: Path) -> None:
    # A simple packet block has no timestamp: it takes the previous packet's. A split starting
    # at one used to give it time 0 (1970), where reading the whole file gave the real time.
    packets = capture().packets
    half = len(packets) // 2
    timed = g.pcapng_bytes(packets[:half], interfaces=[g.NgInterface(tsresol=9)])
    simple = g.pcapng_bytes(packets[half:], simple=True)
    simple_blocks = block_offsets(simple, "<")[2:]  # without its own SHB and IDB
    path = tmp_path / "mixed.pcapng"
    path.write_bytes(timed + simple[simple_blocks[0] :])
    items, _ = whole(path)
    last_timed = packets[half - 1].ts_ns
    assert {i.ts_ns for i in items[-5:]} == {last_timed}
    for target in (2_000, 9_000, 21_000):
        assert_same_as_whole(path, target, 2)
    splits = split_both_ways(path, 2_000)
    assert any(
        isinstance(s.context, PcapngContext) and s.context.last_ts_ns == last_timed for s in splits
    )


def test_pcapng_split_contexts_carry_interfaces(tmp_path: Path) -> None:
    interfaces = [g.NgInterface(tsresol=6), g.NgInterface(g.LINKTYPE_LINUX_SLL2, tsresol=9)]
    path = g.write_pcapng(tmp_path / "c.pcapng", capture().packets, interfaces=interfaces)
    splits = split_capture(str(path), 30_000)
    assert splits[0].context is None
    for split in splits[1:]:
        assert isinstance(split.context, PcapngContext)
        assert [i.linktype for i in split.context.interfaces] == [1, 276]
        assert split.format == "pcapng"


def test_reader_walks_to_a_boundary_when_given_a_bare_offset(tmp_path: Path) -> None:
    for path in (
        g.write_pcap(tmp_path / "o.pcap", capture().packets),
        g.write_pcapng(tmp_path / "o.pcapng", capture().packets),
    ):
        size = path.stat().st_size
        items, _ = whole(path)
        middle = size // 2
        with CaptureReader(str(path), None, middle) as head_reader:
            head = list(head_reader)
        with CaptureReader(str(path), middle, None) as tail_reader:
            tail = list(tail_reader)
        assert head + tail == items
        assert head and tail


def test_small_unknown_and_missing_files_are_one_split(tmp_path: Path) -> None:
    small = g.write_pcap(tmp_path / "s.pcap", capture().packets[:3])
    assert split_capture(str(small), 1 << 20) == [
        CaptureSplit(str(small), 0, 0, small.stat().st_size, "pcap", None)
    ]
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"hello world" * 1000)
    assert [(s.format, s.end) for s in split_capture(str(junk), 100)] == [("unknown", 11000)]
    missing = str(tmp_path / "nope.pcap")
    assert split_capture(missing, 100) == [CaptureSplit(missing, 0, 0, 0, "unknown", None)]
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(b"")
    assert [s.end for s in split_capture(str(empty), 100)] == [0]
