"""pipeline/spark/payloads.py: payload bytes read back from the capture files by offset, each
file opened once per task and read as it is on disk now (not a snapshot)."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

import dpkt
import pytest

from pipeline.spark.payloads import PayloadFiles
from tests.support.paths import DATA

REAL_CAPTURE = DATA / "captures" / "real_lo_ethernet.pcap"  # little-endian, microseconds
PCAP_HEADER = 24
RECORD_HEADER = 16


def _tcp_payloads(path: Path) -> Iterator[tuple[int, bytes]]:
    """(file offset, bytes) of every TCP payload of an Ethernet pcap, found by dpkt: its own
    parse of the records, independent of the pipeline's reader."""
    data = path.read_bytes()
    offset = PCAP_HEADER
    while offset < len(data):
        caught = struct.unpack_from("<I", data, offset + 8)[0]
        start = offset + RECORD_HEADER
        ip = dpkt.ethernet.Ethernet(data[start : start + caught]).data
        tcp = ip.data
        ip_header = ip.hl * 4 if isinstance(ip, dpkt.ip.IP) else 40
        if tcp.data:
            yield start + 14 + ip_header + tcp.off * 4, bytes(tcp.data)
        offset = start + caught


def _payload_files(*paths: Path) -> PayloadFiles:
    return PayloadFiles(tuple(str(p) for p in paths))


def _holds(fd: int, path: Path) -> bool:
    """Whether ``fd`` is open on ``path`` (a closed number may be reused for another file)."""
    try:
        held = os.fstat(fd)
    except OSError:
        return False
    on_disk = path.stat()
    return (held.st_dev, held.st_ino) == (on_disk.st_dev, on_disk.st_ino)


def test_every_payload_of_a_real_capture_reads_back_at_its_offset() -> None:
    payloads = list(_tcp_payloads(REAL_CAPTURE))
    assert len(payloads) == 33
    files = _payload_files(REAL_CAPTURE)
    try:
        for offset, payload in payloads:
            assert files.read(0, offset, len(payload)) == payload
    finally:
        files.close()


def test_the_file_id_picks_the_file_among_the_tasks_paths(tmp_path: Path) -> None:
    first, second = tmp_path / "a.pcap", tmp_path / "b.pcap"
    first.write_bytes(b"0123456789")
    second.write_bytes(b"abcdefghij")
    files = _payload_files(first, second)
    try:
        assert files.read(1, 2, 3) == b"cde"
        assert files.read(0, 2, 3) == b"234"
        assert files.read(1, 0, 0) == b""
    finally:
        files.close()


@pytest.mark.parametrize(
    ("offset", "length", "expected"),
    [(6, 10, b"6789"), (10, 4, b""), (50, 4, b"")],
    ids=["across-the-end", "at-the-end", "past-the-end"],
)
def test_a_read_past_the_end_of_a_file_cut_short_comes_back_short(
    tmp_path: Path, offset: int, length: int, expected: bytes
) -> None:
    path = tmp_path / "cut.pcap"
    path.write_bytes(b"0123456789")
    files = _payload_files(path)
    try:
        assert files.read(0, offset, length) == expected
    finally:
        files.close()


def test_each_file_is_opened_once_and_only_when_read(tmp_path: Path) -> None:
    present = tmp_path / "present.pcap"
    present.write_bytes(b"payload")
    files = _payload_files(present, tmp_path / "never-read.pcap")
    try:
        fd = files.fd(0)
        assert files.read(0, 0, 3) == b"pay"
        assert files.read(0, 3, 4) == b"load"
        assert files.fd(0) == fd
        with pytest.raises(FileNotFoundError):
            files.read(1, 0, 1)
    finally:
        files.close()


def test_reads_see_the_file_as_it_is_now_not_as_it_was_opened(tmp_path: Path) -> None:
    """A capture still written (or rewritten by tcpdump's ring) while the task reads it."""
    path = tmp_path / "growing.pcap"
    path.write_bytes(b"head")
    files = _payload_files(path)
    try:
        assert files.read(0, 0, 8) == b"head"
        with path.open("ab") as out:
            out.write(b"tail")
        assert files.read(0, 4, 4) == b"tail"
        with path.open("r+b") as out:
            out.truncate(2)
        assert files.read(0, 0, 8) == b"he"
    finally:
        files.close()


def test_close_closes_every_file_opened_and_a_later_read_opens_it_again(tmp_path: Path) -> None:
    first, second = tmp_path / "a.pcap", tmp_path / "b.pcap"
    first.write_bytes(b"first")
    second.write_bytes(b"second")
    files = _payload_files(first, second)
    opened = {files.fd(0): first, files.fd(1): second}
    assert all(_holds(fd, path) for fd, path in opened.items())
    files.close()
    assert not any(_holds(fd, path) for fd, path in opened.items())
    files.close()  # twice: nothing left to close
    try:
        assert files.read(1, 0, 6) == b"second"
        assert _holds(files.fd(1), second)
    finally:
        files.close()
