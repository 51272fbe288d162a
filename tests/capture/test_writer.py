from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from capture.pcapng import enhanced_packet_block_parts
from capture.tcp_synth import Endpoint, TcpConversation
from capture.writer import (
    PARTIAL_SUFFIX,
    CaptureRecord,
    CaptureWriter,
    RotationPolicy,
    capture_file_name,
    ensure_writable_dir,
)
from pipeline.ingest import CaptureAnomaly, CaptureReader, TcpPacket
from pipeline.net import Direction

REPO = Path(__file__).resolve().parents[2]


def _records(count: int, size: int, start_ts: int = 1_000) -> list[CaptureRecord]:
    conv = TcpConversation(Endpoint.of("127.0.0.1", 40000), Endpoint.of("127.0.0.1", 61613))
    out = []
    for i in range(count):
        for packet in conv.data(Direction.C2S, start_ts + i, bytes([i % 256]) * size):
            parts = enhanced_packet_block_parts(packet.ts_ns, packet.parts)
            out.append(CaptureRecord.of(parts, len(packet.payload), packet.ts_ns))
    return out


def _read(path: Path, losses: list[CaptureAnomaly] | None = None) -> list[tuple[int, bytes]]:
    """Packets of a file that reads without anomaly, but for capture-loss records (put in
    ``losses`` when given)."""
    with CaptureReader(str(path)) as reader:
        events = list(reader)
        anomalies = [e for e in events if isinstance(e, CaptureAnomaly)]
        assert not [e for e in anomalies if e.kind != "capture_loss"], events
        assert losses is not None or not anomalies, events
        if losses is not None:
            losses += anomalies
        return [(p.ts_ns, reader.payload(p)) for p in events if isinstance(p, TcpPacket)]


def test_file_name_sorts_by_time() -> None:
    name = capture_file_name("stomp", 1_700_000_000_000_000_042, 7)
    assert name == "stomp-20231114T221320.000000042Z-000007.pcapng"
    later = capture_file_name("stomp", 1_700_000_000_100_000_000, 8)
    assert sorted([later, name]) == [name, later]


def test_records_land_in_a_private_file_renamed_on_close(tmp_path: Path) -> None:
    writer = CaptureWriter(tmp_path / "out")
    writer.start()
    assert writer.offer(_records(3, 100))
    deadline = time.monotonic() + 5
    while not list((tmp_path / "out").glob("*" + PARTIAL_SUFFIX)):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert not list((tmp_path / "out").glob("*.pcapng"))
    writer.close()
    [path] = (tmp_path / "out").iterdir()
    assert path.suffix == ".pcapng" and path == writer.files[0]
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert _read(path) == [(1000 + i, bytes([i]) * 100) for i in range(3)]
    counters = writer.counters
    assert (counters.files_written, counters.bytes_captured, counters.bytes_dropped) == (1, 300, 0)


def test_file_mode_holds_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o000)
    try:
        writer = CaptureWriter(tmp_path, file_mode=0o600)
        writer.start()
        writer.offer(_records(1, 10))
        writer.close()
    finally:
        os.umask(old)
    assert stat.S_IMODE(writer.files[0].stat().st_mode) == 0o600


def test_size_rotation_splits_between_whole_records(tmp_path: Path) -> None:
    writer = CaptureWriter(tmp_path, RotationPolicy(max_bytes=20_000))
    writer.start()
    records = _records(40, 1000)
    for record in records:
        writer.offer([record])
    writer.close()
    files = sorted(tmp_path.iterdir())
    assert files == writer.files and len(files) >= 2
    assert all(path.stat().st_size <= 20_000 for path in files)
    packets = [packet for path in files for packet in _read(path)]
    assert packets == [(1000 + i, bytes([i]) * 1000) for i in range(40)]
    assert writer.counters.files_written == len(files)


def test_time_rotation_closes_idle_files(tmp_path: Path) -> None:
    writer = CaptureWriter(tmp_path, RotationPolicy(max_seconds=0.2))
    writer.start()
    writer.offer(_records(1, 10))
    deadline = time.monotonic() + 5
    while not writer.files:
        assert time.monotonic() < deadline, "idle file never rotated"
        time.sleep(0.02)
    assert not list(tmp_path.glob("*" + PARTIAL_SUFFIX))
    writer.offer(_records(1, 20, start_ts=5000))
    writer.close()
    assert len(writer.files) == 2
    assert [len(_read(path)) for path in writer.files] == [1, 1]


def test_full_buffer_refuses_data_but_not_control_records(tmp_path: Path) -> None:
    writer = CaptureWriter(tmp_path, buffer_bytes=5_000)  # not started: nothing drains
    assert writer.offer(_records(1, 1000))
    assert not writer.has_room(5_000)
    assert not writer.offer(_records(1, 4000))
    assert writer.offer(_records(1, 4000), essential=True)
    writer.drop(123)
    assert writer.counters.bytes_dropped == 4000 + 123
    assert writer.counters.records_dropped == 1


def test_unwritable_directory_is_reported(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(NotADirectoryError):
        ensure_writable_dir(blocker / "out")
    ensure_writable_dir(tmp_path / "new" / "dir")
    assert list((tmp_path / "new" / "dir").iterdir()) == []


WRITE_PAST_LIMIT = textwrap.dedent(
    """
    import resource, sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[2])
    from tests.capture.test_writer import _records
    from capture.writer import CaptureWriter, RotationPolicy
    resource.setrlimit(resource.RLIMIT_FSIZE, (60_000, 60_000))
    writer = CaptureWriter(Path(sys.argv[1]), RotationPolicy(max_seconds=0.5))
    writer.start()
    for record in _records(100, 1000):
        writer.offer([record])
        time.sleep(0.001)
    time.sleep(0.7)
    writer.offer(_records(1, 1000, start_ts=9000))
    writer.close()
    c = writer.counters
    print(c.write_errors, c.bytes_dropped, c.bytes_captured, len(writer.files))
    """
)


def test_a_full_disk_drops_capture_data_and_keeps_files_valid(tmp_path: Path) -> None:
    """RLIMIT_FSIZE makes the kernel refuse writes past 60 kB, as a full disk would."""
    out = subprocess.run(
        [sys.executable, "-c", WRITE_PAST_LIMIT, str(tmp_path), str(REPO)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    errors, dropped, captured, files = map(int, out.stdout.split())
    assert errors > 0 and dropped > 0 and files == 2
    assert dropped + captured == 101 * 1000
    first, second = sorted(tmp_path.iterdir())
    assert first.stat().st_size <= 60_000
    kept = _read(first)
    assert 0 < len(kept) < 100  # whole records, in order, some missing
    assert kept == sorted(kept)
    assert all(data == bytes([ts - 1000]) * 1000 for ts, data in kept)
    # what the full disk cost is recorded in the next file written, once writes succeed
    losses: list[CaptureAnomaly] = []
    assert _read(second, losses) == [(9000, b"\0" * 1000)]
    [loss] = losses
    assert loss.detail == (
        f"flow=unknown bytes={dropped} records={dropped // 1000}"
        f" ts_ns={1000 + 100 - dropped // 1000} last_ts_ns=1099 reason=write_failed"
    )


def test_lossless_mode_admits_everything_and_says_when_to_wait(tmp_path: Path) -> None:
    """In lossless mode nothing is refused; past the buffer size the writer is backlogged
    (the proxy stops reading) until it has drained to half the buffer and calls on_drained."""
    drained = threading.Event()
    writer = CaptureWriter(tmp_path, buffer_bytes=5_000, lossless=True, on_drained=drained.set)
    assert writer.offer(_records(1, 1000)) and not writer.backlogged()
    assert writer.has_room(50_000)
    assert writer.offer(_records(10, 1000)) and writer.backlogged()
    writer.start()
    assert drained.wait(5)
    assert not writer.backlogged()
    writer.close()
    assert writer.counters.bytes_dropped == 0 and writer.counters.bytes_captured == 11_000
    assert writer.counters.backlog_waits == 1
    assert len(_read(writer.files[0])) == 11


def test_records_reach_the_open_file_within_the_flush_interval(tmp_path: Path) -> None:
    """What a SIGKILL can lose is bounded: records are in the .partial file (whole blocks,
    readable) well within flush_seconds of being offered, while the file is still open."""
    writer = CaptureWriter(tmp_path, flush_seconds=0.2)
    writer.start()
    writer.offer(_records(1, 100))
    time.sleep(0.1)  # traffic goes on...
    offered = time.monotonic()
    writer.offer(_records(1, 200, start_ts=2_000))
    [partial] = tmp_path.glob("*" + PARTIAL_SUFFIX)
    while len(_read(partial)) < 2:
        assert time.monotonic() - offered < 0.2
        time.sleep(0.01)
    writer.close()
