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
from capture.tcp_synth import TcpConversation, endpoint
from capture.writer import (
    PARTIAL_SUFFIX,
    CaptureRecord,
    CaptureWriter,
    LossTally,
    RotationPolicy,
    capture_file_name,
    ensure_writable_dir,
    start_writeback,
)
from pipeline.ingest import CaptureAnomaly, CaptureReader, TcpPacket
from pipeline.net import Direction
from tests.capture.conftest import SmallDisk

REPO = Path(__file__).resolve().parents[2]


def _records(count: int, size: int, start_ts: int = 1_000) -> list[CaptureRecord]:
    conv = TcpConversation(endpoint("127.0.0.1", 40000), endpoint("127.0.0.1", 61613))
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


# --- a full disk: a real 2 MiB filesystem (tests/capture/conftest.py small_disk) ------------


def _settled(writer: CaptureWriter, records: int, timeout: float = 10) -> None:
    """Wait until the writer has written or dropped ``records`` records."""
    deadline = time.monotonic() + timeout
    counters = writer.counters
    while counters.records_written + counters.records_dropped < records:
        assert time.monotonic() < deadline, counters
        time.sleep(0.01)


def test_space_returning_gets_the_loss_recorded_and_capture_resumed(
    small_disk: SmallDisk,
) -> None:
    """The disk fills mid-capture: what does not fit is dropped; once space returns the
    capture-loss blocks with the lost bytes and their time range are written, and the records
    that follow. Offered = captured + recorded as lost."""
    writer = CaptureWriter(small_disk.mount / "caps", lossless=False)
    writer.start()
    small_disk.fill(leave=100_000)
    for record in _records(300, 1000):
        writer.offer([record])
    _settled(writer, 300)
    dropped = writer.counters.bytes_dropped
    assert 0 < dropped < 300_000 and writer.counters.write_errors > 0
    small_disk.free()
    writer.offer(_records(10, 1000, start_ts=5000))
    writer.close()

    counters = writer.counters
    assert counters.bytes_captured + counters.bytes_dropped == 310_000
    assert counters.bytes_dropped == dropped == counters.bytes_loss_recorded
    assert writer.unrecorded_losses() == []
    losses: list[CaptureAnomaly] = []
    [path] = writer.files
    packets = _read(path, losses)
    kept = {ts for ts, _ in packets}
    lost_ts = [1000 + i for i in range(300) if 1000 + i not in kept]
    assert len(lost_ts) * 1000 == dropped
    # one block per stretch the disk was full (a block may fit where a packet did not)
    blocks = [dict(item.partition("=")[::2] for item in loss.detail.split()) for loss in losses]
    assert {(b["flow"], b["reason"]) for b in blocks} == {("unknown", "write_failed")}
    assert sum(int(b["bytes"]) for b in blocks) == dropped
    assert sum(int(b["records"]) for b in blocks) == len(lost_ts)
    assert min(int(b["ts_ns"]) for b in blocks) == lost_ts[0]
    assert max(int(b["last_ts_ns"]) for b in blocks) == lost_ts[-1]
    assert packets[-10:] == [(5000 + i, bytes([i]) * 1000) for i in range(10)]


def test_a_disk_full_until_close_tells_bytes_and_time_range_lost(
    small_disk: SmallDisk, caplog: pytest.LogCaptureFixture
) -> None:
    """No capture-loss block can be written before the end: the loss is kept per flow with
    its time range and logged at close."""
    small_disk.fill()
    writer = CaptureWriter(small_disk.mount / "caps", lossless=False)
    writer.start()
    ts0 = 1_795_000_000_000_000_000
    for record in _records(50, 1000, start_ts=ts0):
        writer.offer([record])
    with caplog.at_level("ERROR", logger="capture.writer"):
        writer.close()
    counters = writer.counters
    assert (counters.bytes_captured, counters.bytes_dropped) == (0, 50_000)
    assert counters.bytes_loss_recorded == 0 and writer.files == []
    assert writer.unrecorded_losses() == [
        ("flow=unknown", "write_failed", LossTally(50_000, 50, ts0, ts0 + 49))
    ]
    told = [r.getMessage() for r in caplog.records if "recorded in no file" in r.getMessage()]
    assert told[0].startswith("capture loss recorded in no file")
    assert told[0].endswith(
        "50000 bytes in 50 records read between 2026-11-18T11:06:40.000000000Z and"
        " 2026-11-18T11:06:40.000000049Z"
    )
    assert "flow=unknown reason=write_failed bytes=50000" in told[1]
    assert not list(small_disk.mount.glob("caps/*"))


def test_lossless_mode_holds_for_a_full_disk_and_loses_nothing_if_space_returns(
    small_disk: SmallDisk,
) -> None:
    """Lossless mode: a failed write is retried while ``backlogged`` holds the proxy's
    reading; space returning within disk_full_wait ends the hold with nothing lost."""
    drained = threading.Event()
    writer = CaptureWriter(
        small_disk.mount / "caps", lossless=True, disk_full_wait=30, on_drained=drained.set
    )
    writer.start()
    small_disk.fill()
    writer.offer(_records(20, 10_000))
    deadline = time.monotonic() + 5
    while not writer.backlogged():
        assert time.monotonic() < deadline, "the writer never held forwarding"
        time.sleep(0.01)
    time.sleep(0.3)
    assert not drained.is_set() and writer.backlogged()
    small_disk.free()
    assert drained.wait(5)
    assert not writer.backlogged()
    writer.close()
    counters = writer.counters
    assert (counters.bytes_captured, counters.bytes_dropped) == (200_000, 0)
    assert (counters.disk_full_waits, counters.disk_full_timeouts) == (1, 0)
    assert [ts for ts, _ in _read(writer.files[0])] == [1000 + i for i in range(20)]


def test_lossless_mode_stops_holding_after_disk_full_wait(small_disk: SmallDisk) -> None:
    """The hold for a disk that stays full is bounded: after disk_full_wait the proxy may read
    again and capture data is dropped (and told); the disk is not waited for again soon."""
    drained = threading.Event()
    writer = CaptureWriter(
        small_disk.mount / "caps", lossless=True, disk_full_wait=0.5, on_drained=drained.set
    )
    writer.start()
    small_disk.fill()
    started = time.monotonic()
    writer.offer(_records(20, 10_000))
    while not writer.backlogged():
        assert time.monotonic() - started < 5
        time.sleep(0.01)
    assert drained.wait(10)
    assert 0.5 <= time.monotonic() - started < 5
    assert not writer.backlogged()
    writer.offer(_records(5, 10_000, start_ts=9000))
    _settled(writer, 25)
    assert not writer.backlogged()
    writer.close()
    counters = writer.counters
    assert (counters.disk_full_waits, counters.disk_full_timeouts) == (1, 1)
    assert counters.bytes_captured + counters.bytes_dropped == 250_000
    assert counters.bytes_dropped > 0
    [(_, _, tally)] = writer.unrecorded_losses()
    assert tally.size == counters.bytes_dropped - counters.bytes_loss_recorded


def test_writeback_of_a_written_range_can_be_started(tmp_path: Path) -> None:
    """The writer starts writeback after each batch; on Linux the call is there and leaves the
    file as written."""
    if not sys.platform.startswith("linux"):
        pytest.skip("sync_file_range is Linux's")
    assert start_writeback is not None
    path = tmp_path / "f"
    with path.open("wb") as f:
        f.write(b"x" * 100_000)
        f.flush()
        start_writeback(f.fileno(), 0, 100_000)
    assert path.read_bytes() == b"x" * 100_000
