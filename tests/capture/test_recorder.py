from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from capture.masking import PasscodeMasker
from capture.recorder import STILL_OPEN_COMMENT, ConnectionRecorder
from capture.tcp_synth import endpoint
from capture.writer import CaptureWriter
from pipeline.ingest import ACK, FIN, PSH, RST, SYN, CaptureAnomaly, CaptureReader, TcpPacket
from pipeline.net import Direction
from tests.capture.conftest import SmallDisk

CLIENT = endpoint("127.0.0.1", 45000)
SERVER = endpoint("127.0.0.2", 61613)


def _packets(writer: CaptureWriter) -> tuple[list[tuple[TcpPacket, bytes]], list[str]]:
    writer.close()
    [path] = writer.files
    with CaptureReader(str(path)) as reader:
        packets = [(p, reader.payload(p)) for p in reader if isinstance(p, TcpPacket)]
        return packets, [text for _, text in reader.comments]


def _writer(tmp_path: Path, **kwargs: Any) -> CaptureWriter:
    writer = CaptureWriter(tmp_path, **kwargs)
    writer.start()
    return writer


def test_a_whole_conversation(tmp_path: Path) -> None:
    writer = _writer(tmp_path)
    rec = ConnectionRecorder(writer, CLIENT, SERVER, isn=(100, 900))
    rec.opened(1, 2)
    rec.data(Direction.C2S, 3, b"CONNECT\n\n\0")
    rec.data(Direction.S2C, 4, b"CONNECTED\n\n\0")
    rec.fin(Direction.C2S, 5)
    rec.data(Direction.S2C, 6, b"\n")
    rec.fin(Direction.S2C, 7)
    rec.closed()
    rec.data(Direction.S2C, 8, b"ignored after close")
    packets, _ = _packets(writer)
    summary = [(p.ts_ns, p.src_port, p.flags, p.seq, p.ack, data) for p, data in packets]
    assert summary == [
        (1, 45000, SYN, 100, 0, b""),
        (2, 61613, SYN | ACK, 900, 101, b""),
        (2, 45000, ACK, 101, 901, b""),
        (3, 45000, PSH | ACK, 101, 901, b"CONNECT\n\n\0"),
        (4, 61613, PSH | ACK, 901, 111, b"CONNECTED\n\n\0"),
        (5, 45000, FIN | ACK, 111, 913, b""),
        (6, 61613, PSH | ACK, 913, 112, b"\n"),
        (7, 61613, FIN | ACK, 914, 112, b""),
    ]
    assert (packets[0][0].src_ip, packets[0][0].dst_ip) == ("127.0.0.1", "127.0.0.2")


def test_no_room_means_a_sequence_gap_and_a_count(tmp_path: Path) -> None:
    writer = CaptureWriter(tmp_path, buffer_bytes=3000)  # started later: nothing drains yet
    rec = ConnectionRecorder(writer, CLIENT, SERVER, isn=(0, 0))
    rec.opened(1, 1)
    rec.data(Direction.C2S, 2, b"a" * 1000)
    rec.data(Direction.C2S, 3, b"b" * 5000)
    rec.data(Direction.C2S, 4, b"c" * 500)
    writer.start()
    packets, _ = _packets(writer)
    data = [(p.seq, payload) for p, payload in packets if payload]
    assert data == [(1, b"a" * 1000), (6001, b"c" * 500)]
    assert writer.counters.bytes_dropped == 5000


def test_reset_and_refusal(tmp_path: Path) -> None:
    writer = _writer(tmp_path)
    ConnectionRecorder(writer, CLIENT, SERVER).refused(10, 11)
    rec = ConnectionRecorder(writer, endpoint("127.0.0.1", 45001), SERVER)
    rec.opened(20, 21)
    rec.data(Direction.C2S, 22, b"SEND\ndestination:/q/x\n\nhal")
    rec.rst(Direction.C2S, 23)
    rec.fin(Direction.S2C, 24)  # nothing is recorded after a reset
    packets, _ = _packets(writer)
    assert [(p.ts_ns, p.src_port, p.flags) for p, _ in packets] == [
        (10, 45000, SYN),
        (11, 61613, RST | ACK),
        (20, 45001, SYN),
        (21, 61613, SYN | ACK),
        (21, 45001, ACK),
        (22, 45001, PSH | ACK),
        (23, 45001, RST | ACK),
    ]


def test_connections_open_at_the_end_are_marked(tmp_path: Path) -> None:
    writer = _writer(tmp_path)
    rec = ConnectionRecorder(writer, CLIENT, SERVER)
    rec.opened(1, 2)
    rec.data(Direction.C2S, 3, b"x")
    rec.still_open(4)
    packets, comments = _packets(writer)
    assert comments[1:] == [STILL_OPEN_COMMENT]
    assert not [p for p, _ in packets if p.flags & (FIN | RST)]
    assert packets[-1][0].ts_ns == 4


def test_masking_keeps_lengths_and_times(tmp_path: Path) -> None:
    writer = _writer(tmp_path)
    rec = ConnectionRecorder(writer, CLIENT, SERVER, PasscodeMasker(), isn=(0, 0))
    rec.opened(1, 2)
    connect = b"CONNECT\naccept-version:1.2\nlogin:guest\npasscode:hunter2\n\n\0"
    rec.data(Direction.C2S, 10, connect[:30])
    rec.data(Direction.C2S, 11, connect[30:])
    rec.data(Direction.S2C, 12, b"CONNECTED\nversion:1.2\n\n\0")
    rec.data(Direction.C2S, 13, b"SEND\ndestination:/q\npasscode:body-is-not-masked\n\n\0")
    packets, _ = _packets(writer)
    client = [(p.ts_ns, p.seq, data) for p, data in packets if data and p.src_port == 45000]
    masked = connect.replace(b"hunter2", b"*******")
    assert client[:2] == [(10, 1, masked[:30]), (11, 31, masked[30:])]
    assert client[2][2].endswith(b"passcode:body-is-not-masked\n\n\0")
    assert client[2][1] == 1 + len(connect)


def test_bytes_the_sink_had_no_room_for_are_recorded_where_they_went_missing(
    tmp_path: Path,
) -> None:
    """In drop mode a full buffer costs capture data: the gap is in the sequence numbers and
    a capture-loss block just before the data resumes names the connection, the direction,
    where the gap starts and how many bytes it holds; the pipeline's reader reports it."""
    writer = CaptureWriter(tmp_path, buffer_bytes=3_000)  # started later: nothing drains yet
    rec = ConnectionRecorder(writer, CLIENT, SERVER, isn=(1000, 5000))
    rec.opened(10, 11)
    rec.data(Direction.C2S, 12, b"a" * 1000)  # fits
    rec.data(Direction.C2S, 13, b"b" * 2500)  # no room: lost
    rec.data(Direction.C2S, 14, b"c" * 1700)  # no room: lost, the same gap
    writer.start()
    deadline = time.monotonic() + 5
    while writer._queued_bytes:  # let the writer drain the buffer
        assert time.monotonic() < deadline
        time.sleep(0.01)
    rec.data(Direction.C2S, 15, b"d" * 10)
    rec.fin(Direction.C2S, 16)
    writer.close()
    assert writer.counters.bytes_dropped == 4200
    [path] = writer.files
    with CaptureReader(str(path)) as reader:
        items = list(reader)
    [loss] = [item for item in items if isinstance(item, CaptureAnomaly)]
    assert loss.kind == "capture_loss"
    assert loss.detail == (
        "client=127.0.0.1:45000 server=127.0.0.2:61613 direction=client_to_server"
        " seq=2001 bytes=4200 ts_ns=13 last_ts_ns=14 reason=buffer_full"
    )
    packets = [item for item in items if isinstance(item, TcpPacket)]
    before = [p for p in packets if p.record_offset < loss.offset]
    after = [p for p in packets if p.record_offset > loss.offset]
    assert [p.payload_len for p in before] == [0, 0, 0, 1000]
    assert [(p.seq, p.payload_len) for p in after][0] == (2001 + 4200, 10)


def test_a_loss_block_the_full_disk_refused_is_written_once_space_returns(
    small_disk: SmallDisk,
) -> None:
    """The capture-loss block of a buffer gap cannot be written on a full disk: its loss (the
    connection, direction, bytes and time range) is kept by the writer and written once space
    returns, next to the disk's own loss. Dropped = recorded as lost, nothing told only in
    the log."""
    writer = CaptureWriter(small_disk.mount / "caps", buffer_bytes=3_000)
    rec = ConnectionRecorder(writer, CLIENT, SERVER, isn=(1000, 5000))
    rec.opened(10, 11)
    rec.data(Direction.C2S, 12, b"a" * 1000)  # queued, then refused by the full disk
    rec.data(Direction.C2S, 13, b"b" * 2500)  # no room in the buffer: a gap
    small_disk.fill()
    writer.start()
    deadline = time.monotonic() + 5
    while writer._queued_bytes or not writer.counters.records_dropped:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    rec.data(Direction.S2C, 14, b"c" * 700)  # written to no file either
    rec.data(Direction.C2S, 15, b"d" * 10)  # ends the gap: its loss block fails too
    deadline = time.monotonic() + 5
    while writer.counters.records_dropped < 7:  # handshake, 3 chunks, the loss block
        assert time.monotonic() < deadline, writer.counters
        time.sleep(0.01)
    assert writer.counters.bytes_loss_recorded == 0
    small_disk.free()
    rec.fin(Direction.C2S, 16)
    writer.close()

    counters = writer.counters
    assert counters.bytes_dropped == 1000 + 2500 + 700 + 10 == counters.bytes_loss_recorded
    assert writer.unrecorded_losses() == []
    [path] = writer.files
    with CaptureReader(str(path)) as reader:
        losses = sorted(
            item.detail for item in reader
            if isinstance(item, CaptureAnomaly) and item.kind == "capture_loss"
        )
    flow = "client=127.0.0.1:45000 server=127.0.0.2:61613 direction="
    assert losses == [
        f"{flow}client_to_server bytes=1010 records=2 ts_ns=12 last_ts_ns=15 reason=write_failed",
        f"{flow}client_to_server bytes=2500 records=1 ts_ns=13 last_ts_ns=13 reason=buffer_full",
        f"{flow}server_to_client bytes=700 records=1 ts_ns=14 last_ts_ns=14 reason=write_failed",
    ]
