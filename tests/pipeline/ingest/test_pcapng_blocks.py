from __future__ import annotations

import struct

from pipeline.ingest.pcapng_blocks import (
    EPB,
    IDB,
    SHB,
    Interface,
    PcapngBlocks,
    is_pcapng_magic,
    tsresol_factors,
)
from tests.support import pcapgen as g


def packets() -> list[g.SynthPacket]:
    return g.generate([g.stomp_conversation(0, messages=1)]).packets


def walk(data: bytes) -> tuple[PcapngBlocks, list[int]]:
    blocks = PcapngBlocks(data, len(data))
    return blocks, list(blocks.offsets(0))


def test_tsresol_factors() -> None:
    assert tsresol_factors(6) == (1000, 1)
    assert tsresol_factors(9) == (1, 1)
    assert tsresol_factors(12) == (1, 1000)
    assert tsresol_factors(0x80 | 10) == (1_000_000_000, 1024)


def test_walk_collects_interfaces_and_comments_in_either_byte_order() -> None:
    for order in ("<", ">"):
        interfaces = [g.NgInterface(tsresol=9, tsoffset_s=5), g.NgInterface(101, tsresol=3)]
        data = g.pcapng_bytes(packets(), interfaces=interfaces, byte_order=order, comments=True)
        blocks, offsets = walk(data)
        types = [struct.unpack_from(order + "I", data, off)[0] for off in offsets]
        assert types[:3] == [SHB, IDB, IDB] and set(types[3:]) == {EPB}
        context = blocks.context()
        assert context.byte_order == order and context.section_offset == 0
        assert context.interfaces == (
            Interface(1, 0, 1, 1, 5_000_000_000),
            Interface(101, 0, 1_000_000, 1, 0),
        )
        texts = [text for _off, text in blocks.comments]
        assert texts[:3] == [
            "synthetic capture from tests/support/pcapgen.py",
            "interface eth0",
            "interface eth0",
        ]


def test_context_resumes_a_walk_midway() -> None:
    data = g.pcapng_bytes(packets(), interfaces=[g.NgInterface(tsresol=9)])
    blocks, offsets = walk(data)
    resumed = PcapngBlocks(data, len(data), blocks.context())
    assert list(resumed.offsets(offsets[5])) == offsets[5:]


def test_block_len_checks_the_trailer_and_resync_finds_the_next_block() -> None:
    data = bytearray(g.pcapng_bytes(packets()))
    blocks, offsets = walk(bytes(data))
    victim = offsets[4]
    data[victim + 4 : victim + 8] = b"\x01\x00\x00\x00"  # length 1
    broken = PcapngBlocks(bytes(data), len(data), blocks.context())
    assert broken.block_len(victim) is None
    nxt, anomaly, _type, _len = broken.next_block(victim)
    assert nxt == offsets[5]
    assert anomaly is not None
    assert (anomaly.kind, anomaly.offset) == ("bad_block_length", victim)


def test_resync_accepts_an_unaligned_section_header() -> None:
    first = g.pcapng_bytes(packets())
    second = g.pcapng_bytes(packets(), byte_order=">")
    data = first[:-6] + b"\x00" * 3 + second  # a damaged tail, then a new section off alignment
    blocks, offsets = walk(data)
    assert len(first) - 3 in offsets
    assert blocks.order == ">"


def test_magic() -> None:
    assert is_pcapng_magic(g.pcapng_bytes([]), 28)
    assert not is_pcapng_magic(g.pcap_bytes([]), 24)
    assert not is_pcapng_magic(b"\x0a\x0d", 2)
