"""Relaying one connection, in-process on both event loops, against plain TCP peers."""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from capture.config import HostPort
from capture.relay import WRITE_HIGH_WATER
from pipeline.ingest import CaptureReader, TcpPacket
from tests.capture.harness import (
    abort_with_rst,
    proxied,
    read_all,
    reassemble_captures,
    serving,
)


def test_bytes_pass_exactly_both_ways_and_the_capture_has_them(
    run: Callable, tmp_path: Path
) -> None:
    upload = os.urandom(5_000_000)
    download = os.urandom(3_000_000)
    seen: dict[str, str] = {}

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async def send() -> None:
            for i in range(0, len(download), 70_000):
                writer.write(download[i : i + 70_000])
                await writer.drain()

        sender = asyncio.ensure_future(send())
        seen["server_got"] = hashlib.sha256(await read_all(reader)).hexdigest()
        await sender
        writer.close()

    async def main() -> list[Path]:
        async with serving(handler) as upstream, proxied(tmp_path, upstream) as p:
            reader, writer = await asyncio.open_connection(p.host, p.port)
            pos = 0
            for size in (1, 10, 1000, 65536, 300_000, 1 << 20):
                writer.write(upload[pos : pos + size])
                pos += size
            writer.write(upload[pos:])
            writer.write_eof()
            got = await read_all(reader)
            writer.close()
            seen["client_got"] = hashlib.sha256(got).hexdigest()
            await asyncio.sleep(0.1)
            counters = p.proxy.counters
            assert (counters.connections_open, counters.connections_total) == (0, 1)
            assert counters.bytes_client_to_server == len(upload)
            assert counters.bytes_server_to_client == len(download)
            return await p.stop()

    files = run(main())
    assert seen == {
        "server_got": hashlib.sha256(upload).hexdigest(),
        "client_got": hashlib.sha256(download).hexdigest(),
    }
    [conn] = reassemble_captures(files)
    assert bytes(conn.sent) == upload and bytes(conn.received) == download
    assert conn.gaps == [] and conn.role_source == "syn"
    assert (conn.client_end, conn.server_end) == ("fin", "fin")


def test_half_close_passes_through(run: Callable, tmp_path: Path) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await read_all(reader)  # ends at the client's FIN
        await asyncio.sleep(0.05)
        writer.write(b"answer after your FIN to " + request)
        await writer.drain()
        writer.close()

    async def main() -> tuple[bytes, list[Path]]:
        async with serving(handler) as upstream, proxied(tmp_path, upstream) as p:
            reader, writer = await asyncio.open_connection(p.host, p.port)
            writer.write(b"SEND\n\n\0")
            writer.write_eof()
            answer = await read_all(reader)
            writer.close()
            await asyncio.sleep(0.1)
            return answer, await p.stop()

    answer, files = run(main())
    assert answer == b"answer after your FIN to SEND\n\n\0"
    [conn] = reassemble_captures(files)
    assert bytes(conn.received) == answer
    assert (conn.client_end, conn.server_end) == ("fin", "fin")
    with CaptureReader(str(files[0])) as reader:
        items = list(reader)
    packets = [p for p in items if isinstance(p, TcpPacket)]
    assert packets == items
    flags = [(p.src_port == conn.client[1], p.flags & 0x01, p.payload_len) for p in packets]
    client_fin = flags.index((True, 1, 0))
    answer_at = flags.index((False, 0, len(answer)))
    assert client_fin < answer_at


@pytest.mark.parametrize("who", ["client", "server"])
def test_a_reset_is_passed_on_as_a_reset(
    run: Callable, tmp_path: Path, who: str
) -> None:
    outcome: dict[str, str] = {}
    server_ready = asyncio.Event

    async def main() -> list[Path]:
        ready = server_ready()

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readexactly(5)
            ready.set()
            if who == "server":
                abort_with_rst(writer)
                return
            try:
                outcome["server"] = repr(await reader.read())
            except ConnectionResetError:
                outcome["server"] = "reset"

        async with serving(handler) as upstream, proxied(tmp_path, upstream) as p:
            reader, writer = await asyncio.open_connection(p.host, p.port)
            writer.write(b"hello")
            await ready.wait()
            if who == "client":
                abort_with_rst(writer)
                await asyncio.sleep(0.3)
            else:
                try:
                    outcome["client"] = repr(await reader.read())
                except ConnectionResetError:
                    outcome["client"] = "reset"
            await asyncio.sleep(0.1)
            assert p.proxy.counters.connections_open == 0
            return await p.stop()

    files = run(main())
    other = "server" if who == "client" else "client"
    assert outcome == {other: "reset"}
    [conn] = reassemble_captures(files)
    assert (conn.client_end if who == "client" else conn.server_end) == "rst"


def test_a_reader_that_stalls_pauses_the_writer_side(run: Callable) -> None:
    total = 256 << 20
    block = os.urandom(1 << 20)
    go = asyncio.Event

    async def main() -> tuple[int, list[int]]:
        release = go()
        received: list[int] = []

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await release.wait()
            received.append(len(await read_all(reader)))
            writer.close()

        async with serving(handler) as upstream, proxied(None, upstream) as p:
            reader, writer = await asyncio.open_connection(p.host, p.port)

            async def pump() -> None:
                for _ in range(total // len(block)):
                    writer.write(block)
                    await writer.drain()
                writer.write_eof()

            pumping = asyncio.ensure_future(pump())
            buffered: list[int] = []
            deadline = time.monotonic() + 20
            while not buffered:
                assert time.monotonic() < deadline, "the proxy never stopped reading"
                await asyncio.sleep(0.01)
                for relay in p.proxy.relays:
                    # the client is also paused while the upstream connection is being made
                    paused = relay.client.transport and not relay.client.transport.is_reading()
                    if paused and relay.upstream.full:
                        assert relay.upstream.transport is not None
                        buffered.append(relay.upstream.transport.get_write_buffer_size())
            await asyncio.sleep(0.3)
            assert not pumping.done()
            release.set()
            await pumping
            await read_all(reader)
            writer.close()
            return received[0], buffered

    received, buffered = run(main())
    assert received == total
    assert max(buffered) <= WRITE_HIGH_WATER + (256 << 10)


def test_unreachable_upstream_resets_the_client_and_is_recorded(
    run: Callable, tmp_path: Path
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead_port = probe.getsockname()[1]  # nothing listens once closed

    async def main() -> tuple[str, int, list[Path]]:
        async with proxied(tmp_path, HostPort("127.0.0.1", dead_port)) as p:
            reader, writer = await asyncio.open_connection(p.host, p.port)
            writer.write(b"CONNECT\n\n\0")
            try:
                result = repr(await reader.read())
            except ConnectionResetError:
                result = "reset"
            writer.close()
            await asyncio.sleep(0.05)
            failures = p.proxy.counters.upstream_failures
            return result, failures, await p.stop()

    result, failures, files = run(main())
    assert (result, failures) == ("reset", 1)
    [conn] = reassemble_captures(files)
    assert conn.server == ("127.0.0.1", dead_port) and conn.server_end == "rst"
    assert conn.sent == b""
