"""`Buffer`: the three kinds of bytes a capture reader is handed, one alias for all."""

from __future__ import annotations

import mmap
import struct
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.ingest.types import Buffer
from tests.support.paths import DATA

CAPTURE = DATA / "captures" / "real_lo_ethernet.pcap"
PCAP_MAGIC_US = 0xA1B2C3D4
LINKTYPE_ETHERNET = 1


@pytest.fixture
def mapped() -> Iterator[mmap.mmap]:
    with CAPTURE.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as view:
        yield view


def test_buffer_is_bytes_bytearray_or_mmap() -> None:
    assert set(typing.get_args(Buffer)) == {bytes, bytearray, mmap.mmap}


def test_a_mapped_file_is_a_buffer(mapped: mmap.mmap) -> None:
    assert isinstance(mapped, Buffer)


@pytest.mark.parametrize("value", [b"", bytearray(b"\x00")])
def test_bytes_and_bytearray_are_buffers(value: bytes | bytearray) -> None:
    assert isinstance(value, Buffer)


@pytest.mark.parametrize("value", [memoryview(b"ab"), "ab", [1, 2]])
def test_other_byte_like_or_sequence_values_are_not(value: object) -> None:
    assert not isinstance(value, Buffer)


def _header(buf: Buffer) -> tuple[int, int, int, bytes]:
    """What a reader takes from a pcap's global header: the magic, the link type, a byte by
    index and a slice."""
    magic, *_, linktype = struct.unpack_from("<IHHiIII", buf, 0)
    return magic, linktype, buf[0], bytes(buf[20:24])


def test_every_kind_reads_a_real_capture_the_same(mapped: mmap.mmap) -> None:
    data = Path(CAPTURE).read_bytes()
    expected = _header(data)
    assert expected[:2] == (PCAP_MAGIC_US, LINKTYPE_ETHERNET)
    assert _header(bytearray(data)) == expected
    assert _header(mapped) == expected
