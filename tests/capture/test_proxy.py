"""The proxy's listeners and shutdown, in-process on both event loops."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from capture.config import HostPort, ListenerConfig, ProxyConfig
from capture.proxy import CaptureProxy
from capture.recorder import STILL_OPEN_COMMENT
from pipeline.ingest import SYN, CaptureReader, TcpPacket
from pipeline.reassembly import Data, Opened, Segment
from tests.capture.harness import (
    proxied,
    read_all,
    reassemble_captures,
    serving,
)
from tests.support.brokers import free_port
from tests.support.local_reassembly import LocalReassembly


def test_ipv6_clients_are_recorded_with_their_address(
    run: Callable, tmp_path: Path
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(await read_all(reader))
        writer.close()

    async def main() -> tuple[tuple[str, int], list[Path]]:
        async with serving(handler) as upstream, proxied(
            tmp_path, upstream, listen=HostPort("::1", 0)
        ) as p:
            reader, writer = await asyncio.open_connection("::1", p.port)
            local = writer.get_extra_info("sockname")[:2]
            writer.write(b"over IPv6")
            writer.write_eof()
            assert await read_all(reader) == b"over IPv6"
            writer.close()
            await asyncio.sleep(0.05)
            return local, await p.stop()

    local, files = run(main())
    [conn] = reassemble_captures(files)
    assert conn.client == ("::1", local[1])
    assert conn.server[0] == "::ffff:7f00:1"
    assert bytes(conn.sent) == bytes(conn.received) == b"over IPv6"


def test_stop_drains_then_marks_what_is_still_open(
    run: Callable, tmp_path: Path
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_all(reader)
        writer.close()

    async def main() -> tuple[float, list[Path], bytes]:
        async with serving(handler) as upstream, proxied(tmp_path, upstream) as p:
            _, idle = await asyncio.open_connection(p.host, p.port)
            idle.write(b"stays open")
            r2, leaving = await asyncio.open_connection(p.host, p.port)
            leaving.write(b"leaves during the drain")
            await asyncio.sleep(0.1)

            async def leave() -> None:
                await asyncio.sleep(0.2)
                leaving.write_eof()
                await read_all(r2)

            hurry = asyncio.Event()
            asyncio.get_running_loop().call_later(1.0, hurry.set)
            started = time.monotonic()
            leaver = asyncio.ensure_future(leave())
            files = await p.stop(drain=30, hurry=hurry)
            elapsed = time.monotonic() - started
            await leaver
            late = b""
            try:
                idle.write(b"too late")
                await idle.drain()
            except ConnectionError:
                late = b"refused"
            return elapsed, files, late

    elapsed, files, _ = run(main())
    assert 0.9 < elapsed < 5
    idle, leaving = reassemble_captures(files)
    assert bytes(idle.sent) == b"stays open"
    assert (idle.client_end, idle.server_end) == ("none", "none")
    assert bytes(leaving.sent) == b"leaves during the drain"
    assert (leaving.client_end, leaving.server_end) == ("fin", "fin")
    with CaptureReader(str(files[0])) as reader:
        list(reader)
        assert [text for _, text in reader.comments][1:] == [STILL_OPEN_COMMENT]


def test_each_listener_listens_only_where_told(run: Callable) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"from upstream")
        writer.close()

    async def main() -> tuple[list[bytes], str]:
        async with serving(handler) as upstream:
            config = ProxyConfig(
                listeners=(
                    ListenerConfig(HostPort("127.0.0.1", 0), upstream),
                    ListenerConfig(HostPort("::1", 0), upstream),
                ),
                out_dir=None,
            )
            proxy = CaptureProxy(config, None)
            bound = await proxy.start()
            answers = []
            for listener in bound:
                [(host, port)] = [a[:2] for a in listener.addresses]
                reader, writer = await asyncio.open_connection(host, port)
                answers.append(await read_all(reader))
                writer.close()
            v4_port = bound[0].addresses[0][1]
            try:
                await asyncio.open_connection("127.0.0.2", v4_port)
                elsewhere = "accepted"
            except ConnectionRefusedError:
                elsewhere = "refused"
            await proxy.stop()
            return answers, elsewhere

    answers, elsewhere = run(main())
    assert answers == [b"from upstream", b"from upstream"]
    assert elsewhere == "refused"


def _connect_from(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.setblocking(False)
    return sock


@pytest.mark.parametrize("times", [2, 100])
def test_a_client_reusing_its_port_gets_new_sequence_numbers(
    run: Callable, tmp_path: Path, times: int
) -> None:
    """A client binding one local port again and again (SO_REUSEADDR) makes connections on the
    same 4-tuple; each one starts at its own initial sequence numbers, both ways, as a real
    stack's would, so a reader can tell them apart."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(await reader.readexactly(5))
        writer.close()  # the far end closes first: the client's port has no TIME_WAIT

    async def main() -> tuple[int, list[Path]]:
        loop = asyncio.get_running_loop()
        async with serving(handler) as upstream, proxied(tmp_path, upstream) as p:
            local_port = free_port()
            for i in range(times):
                sock = _connect_from(local_port)
                await loop.sock_connect(sock, (p.host, p.port))
                reader, writer = await asyncio.open_connection(sock=sock)
                writer.write(b"%05d" % i)
                assert await read_all(reader) == b"%05d" % i
                writer.close()
                await writer.wait_closed()
            await asyncio.sleep(0.05)
            return local_port, await p.stop()

    local_port, files = run(main())
    syns: list[int] = []
    syn_acks: list[int] = []
    for path in files:
        with CaptureReader(str(path)) as reader:
            for packet in reader:
                assert isinstance(packet, TcpPacket)
                if packet.flags & SYN and packet.src_port == local_port:
                    syns.append(packet.seq)
                elif packet.flags & SYN and packet.dst_port == local_port:
                    syn_acks.append(packet.seq)
    assert len(syns) == len(syn_acks) == times
    assert len(set(syns)) == len(set(syn_acks)) == times
    # Ingested, every connection is one of its own with all its bytes: none is lost as a
    # retransmission of the one before it on the same 4-tuple.
    opened = 0
    data: dict[tuple[str, bool], bytes] = {}
    for event in LocalReassembly([str(path) for path in files]):
        if type(event) is Opened:
            opened += 1
        elif type(event) is Segment and type(event.event) is Data:
            key = (event.connection_id, event.from_client)
            data[key] = data.get(key, b"") + event.event.data
    assert opened == times
    sent = sorted(payload for (_, from_client), payload in data.items() if from_client)
    assert sent == [b"%05d" % i for i in range(times)]
