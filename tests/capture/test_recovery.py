"""Capture files left by a killed proxy: cut back to whole blocks, renamed, logged; and the
proxy SIGKILLed mid-stream between a real client and a real broker, then restarted."""

from __future__ import annotations

import logging
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

from capture.recovery import (
    UNRECOVERABLE_SUFFIX,
    ValidPrefix,
    recover_partial_files,
    valid_prefix,
)
from capture.writer import PARTIAL_SUFFIX, CaptureWriter
from pipeline.ingest import CaptureAnomaly, CaptureReader, TcpPacket
from tests.capture.harness import reassemble_captures
from tests.capture.test_cli import capture_proxy
from tests.capture.test_writer import _read, _records
from tests.support.brokers import Broker
from tests.support.pcapgen import pcapng_bytes, udp_packet

NAME = "stomp-20260101T000000.000000000Z-000001.pcapng"


def _partial(tmp_path: Path, records: int = 5) -> tuple[Path, bytes]:
    """A partial capture as a killed proxy leaves it: whole blocks, not renamed."""
    writer = CaptureWriter(tmp_path / "w")
    writer.start()
    writer.offer(_records(records, 300))
    writer.close()
    data = writer.files[0].read_bytes()
    partial = tmp_path / (NAME + PARTIAL_SUFFIX)
    partial.write_bytes(data)
    return partial, data


@pytest.mark.parametrize("cut", [1, 100, 331])
def test_a_torn_last_block_is_cut_and_the_file_renamed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, cut: int
) -> None:
    partial, data = _partial(tmp_path)
    partial.write_bytes(data[:-cut])  # the crash tore the last block
    with caplog.at_level(logging.WARNING):
        [done] = recover_partial_files(tmp_path)
    final = tmp_path / NAME
    assert done.final == final and not partial.exists()
    assert done.cut_bytes == len(data) - cut - done.kept_bytes > 0
    assert [ts for ts, _ in _read(final)] == [1000, 1001, 1002, 1003]
    assert f"recovered {partial.name} left by an earlier run as {NAME}" in caplog.text


def test_a_whole_file_is_renamed_as_it_is_and_garbage_after_it_is_cut(tmp_path: Path) -> None:
    partial, data = _partial(tmp_path)
    partial.write_bytes(data + b"\x06\x00\x00\x00\xff\xff\x00\x00garbage")
    [done] = recover_partial_files(tmp_path)
    assert done.cut_bytes == 15 and (tmp_path / NAME).read_bytes() == data
    assert len(_read(tmp_path / NAME)) == 5


def test_a_file_without_its_headers_is_set_aside(tmp_path: Path) -> None:
    partial, data = _partial(tmp_path)
    partial.write_bytes(data[:20])
    [done] = recover_partial_files(tmp_path)
    assert not done.usable and done.final.name == NAME + UNRECOVERABLE_SUFFIX
    assert done.final.read_bytes() == data[:20]
    assert not list(tmp_path.glob("*.pcapng"))


def test_an_existing_final_name_is_not_overwritten(tmp_path: Path) -> None:
    partial, data = _partial(tmp_path)
    (tmp_path / NAME).write_bytes(b"already there")
    [done] = recover_partial_files(tmp_path)
    assert done.final.name == NAME.replace(".pcapng", "-recovered-1.pcapng")
    assert (tmp_path / NAME).read_bytes() == b"already there"


def test_valid_prefix_walks_whole_blocks_only(tmp_path: Path) -> None:
    _, data = _partial(tmp_path, records=2)
    assert valid_prefix(data).length == len(data)
    assert valid_prefix(data).has_interface
    assert valid_prefix(data[:-4]).blocks == valid_prefix(data).blocks - 1
    assert valid_prefix(b"\x06\x00\x00\x00" + data[4:]).length == 0  # no section header


@pytest.mark.parametrize("byte_order", ["<", ">"])
def test_valid_prefix_follows_each_sections_byte_order(byte_order: str) -> None:
    packets = [udp_packet(1_000 + i, "10.0.0.1", "10.0.0.2") for i in range(3)]
    section = pcapng_bytes(packets, byte_order=byte_order, comments=True)
    other = pcapng_bytes(packets, byte_order=">" if byte_order == "<" else "<")
    data = section + other
    assert valid_prefix(data) == ValidPrefix(len(data), 2 * (2 + 3), True)
    assert valid_prefix(data + data[:30]).length == len(data)


# --- SIGKILL mid-stream ------------------------------------------------------------------------

FLUSH_SECONDS = 0.5


def _stomp_sender(port: int, broker: Broker, stop: threading.Event,
                  sent: list[tuple[float, int]], data: bytearray) -> None:
    """A client sending a SEND frame every 5 ms; ``sent`` gets (time, bytes sent so far)."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        connect = (f"CONNECT\naccept-version:1.2\nhost:{broker.vhost or 'localhost'}\n"
                   f"login:{broker.login}\npasscode:{broker.passcode}\n\n\0").encode()
        sock.sendall(connect)
        data += connect
        assert sock.recv(4096).startswith(b"CONNECTED")
        i = 0
        try:
            while not stop.is_set():
                frame = b"SEND\ndestination:/queue/crash\n\nmessage %06d\0" % i
                sock.sendall(frame)
                data += frame
                sent.append((time.monotonic(), len(data)))
                i += 1
                time.sleep(0.005)
        except OSError:
            pass  # the proxy was killed


@pytest.mark.broker
def test_a_proxy_killed_mid_stream_is_recovered_on_restart(
    activemq: Broker, tmp_path: Path
) -> None:
    """SIGKILL while a client sends; the restarted proxy turns the .partial file into a
    capture that reads cleanly, holding all the client sent but at most the flush window."""
    out = tmp_path / "caps"
    sent: list[tuple[float, int]] = []
    data = bytearray()
    stop = threading.Event()
    flush = ("--flush-seconds", str(FLUSH_SECONDS))
    with capture_proxy(activemq.address, out, *flush) as proxy:
        sender = threading.Thread(
            target=_stomp_sender, args=(proxy.port, activemq, stop, sent, data)
        )
        sender.start()
        time.sleep(1.5)
        proxy.process.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        proxy.process.wait(10)
        stop.set()
        sender.join(10)
    [partial] = out.glob("*" + PARTIAL_SUFFIX)
    assert not list(out.glob("*.pcapng"))

    with capture_proxy(activemq.address, out, *flush) as restarted:
        summary = restarted.stop()
    recovered = [line for line in restarted.lines if "recovered " in line]
    assert len(recovered) == 1 and partial.name in recovered[0], restarted.lines
    assert summary["connections_total"] == 0
    [path] = out.glob("*.pcapng")
    assert path.name == partial.name.removesuffix(PARTIAL_SUFFIX)
    with CaptureReader(str(path)) as reader:
        items = list(reader)
    assert not [item for item in items if isinstance(item, CaptureAnomaly)]
    assert any(isinstance(item, TcpPacket) for item in items)

    [conn] = reassemble_captures([path])
    assert conn.gaps == []
    captured = bytes(conn.sent)
    assert captured == bytes(data[: len(captured)])
    # everything sent before the last flush window was captured
    sent_before_window = max(
        (size for ts, size in sent if ts <= killed - FLUSH_SECONDS), default=0
    )
    assert sent_before_window > 0
    assert len(captured) >= sent_before_window, (len(captured), sent_before_window, len(data))
    print(f"killed after {len(data)} bytes sent; recovered {len(captured)} bytes;"
          f" {len(data) - len(captured)} lost (window allows {len(data) - sent_before_window})")
