"""How many clients `stomp-capture` takes at once: 10,000 through it (its open files limit
raised by the proxy itself), and clients past its limit waiting rather than reset."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from capture.accepting import bind_sockets, connections_within_open_files_limit
from capture.config import ClientTls
from tests.capture.harness import proxied, read_all, reassemble_captures, serving
from tests.capture.test_cli import ProxyProcess, capture_proxy

CONNECTIONS = 10_000
CONNECTING_AT_ONCE = 500
PROXY_OPEN_FILES = 65_536
DEADLINE_S = 60
ROOM = re.compile(r"open files limit (\d+)(?: \(raised from (\d+)\))?: up to (\d+) connections")
ECHO_SERVER = """
import asyncio, sys, uvloop
class Echo(asyncio.Protocol):
    def connection_made(self, transport): self.transport = transport
    def data_received(self, data): self.transport.write(data)
    def eof_received(self): return False
async def main():
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Echo, "127.0.0.1", 0, backlog=4096)
    print(server.sockets[0].getsockname()[1], flush=True)
    await loop.run_in_executor(None, sys.stdin.read)
uvloop.run(main())
"""


def _frame(i: int) -> bytes:
    return b"SEND\ndestination:/queue/c%d\ncontent-length:7\n\nhello %d\x00\n" % (i, i % 10)


class Echo(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.transport.write(data)  # type: ignore[attr-defined]

    def eof_received(self) -> bool:
        return False  # close, as the client did


def _open_files_limit(soft: int, hard: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    return apply


def _proxy_hard_limit() -> int:
    """The proxy's hard limit: PROXY_OPEN_FILES where this process may raise it (root with
    CAP_SYS_RESOURCE), else the one it inherits."""
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (before[0], PROXY_OPEN_FILES))
    except (OSError, ValueError):
        return before[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, before)  # lowering it back is allowed as root
    return PROXY_OPEN_FILES


@pytest.fixture
def echo_server() -> Iterator[tuple[str, int]]:
    """An echo server in a process of its own: its descriptors do not count against ours."""
    process = subprocess.Popen(
        [sys.executable, "-c", ECHO_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdin is not None
    try:
        yield "127.0.0.1", int(process.stdout.readline())
    finally:
        process.stdin.close()
        process.wait(10)


@pytest.fixture
def open_files_for_the_clients() -> Iterator[None]:
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    if before[1] != resource.RLIM_INFINITY and before[1] < CONNECTIONS + 500:
        pytest.skip(f"hard open files limit {before[1]} is too low for {CONNECTIONS} clients")
    resource.setrlimit(resource.RLIMIT_NOFILE, (before[1], before[1]))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, before)


def _usage(pid: int) -> tuple[int, int]:
    """(resident memory in bytes, open descriptors) of a process."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss_kb = int(re.search(r"VmRSS:\s+(\d+) kB", status)[1])  # type: ignore[index]
    return rss_kb * 1024, len(list(Path(f"/proc/{pid}/fd").iterdir()))


@dataclass
class Held:
    ports: list[int]
    peak_open: int
    rss: int
    fds: int


async def _hold_connections(proxy: ProxyProcess, room: int) -> Held:
    """CONNECTIONS clients connect through the proxy and each has one frame echoed. While
    ``room`` of them are held open at once the rest wait (in the proxy's listen backlog when
    room < CONNECTIONS); closing that many of the first lets them through. Then all close."""
    connecting = asyncio.Semaphore(CONNECTING_AT_ONCE)
    writers: list[asyncio.StreamWriter] = []
    ports = [0] * CONNECTIONS
    echoed: list[asyncio.StreamWriter] = []

    async def one(i: int) -> None:
        async with connecting:
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writers.append(writer)
            ports[i] = writer.get_extra_info("sockname")[1]
            writer.write(_frame(i))
        assert await reader.readexactly(len(_frame(i))) == _frame(i)
        echoed.append(writer)

    at_once = min(room, CONNECTIONS)
    async with asyncio.timeout(DEADLINE_S):
        clients = asyncio.gather(*(one(i) for i in range(CONNECTIONS)))
        while len(echoed) < at_once or proxy.stats().get("connections_open", 0) < at_once:
            await asyncio.sleep(0.05)
        peak_open = proxy.stats()["connections_open"]
        rss, fds = _usage(proxy.process.pid)
        for writer in echoed[: CONNECTIONS - at_once]:
            writer.close()
        await clients
        for writer in writers:
            writer.close()
        await asyncio.gather(*(writer.wait_closed() for writer in writers))
    return Held(ports, peak_open, rss, fds)


@pytest.mark.slow
def test_ten_thousand_connections_at_once(
    tmp_path: Path,
    echo_server: tuple[str, int],
    open_files_for_the_clients: None,
    record_property: Callable[[str, object], None],
) -> None:
    """Started with a soft limit of 1024 open files, the proxy raises its own to the hard
    limit (65,536 where the test may raise that) and relays and captures 10,000 connections
    held at once. Under a hard limit too low for them (two descriptors a connection: 20,000
    is, and without CAP_SYS_RESOURCE even root cannot raise it), it says so at start, holds as
    many as fit, and the rest wait in its backlog until some close: none is reset, every byte
    comes back, and every connection is in the capture."""
    hard = _proxy_hard_limit()
    started = time.monotonic()
    with capture_proxy(
        echo_server, tmp_path / "caps", "--max-connections", str(CONNECTIONS),
        preexec_fn=_open_files_limit(1024, hard),
    ) as proxy:
        deadline = time.monotonic() + 5  # logged just after the listening line
        while not (said := [m for line in list(proxy.lines) if (m := ROOM.search(line))]):
            assert time.monotonic() < deadline, proxy.lines
            time.sleep(0.01)
        room = int(said[0][3])
        held = asyncio.run(_hold_connections(proxy, room))
        proxy.wait_for(lambda s: s.get("connections_open") == 0, timeout=20)
        summary = proxy.stop()
    record_property("proxy_rss_bytes", held.rss)
    record_property("proxy_open_fds", held.fds)
    print(f"\n{CONNECTIONS} connections, {held.peak_open} at once (room {room}, hard limit"
          f" {hard}): proxy RSS {held.rss / 1e6:.0f} MB, {held.fds} descriptors,"
          f" {time.monotonic() - started:.1f} s")

    assert (int(said[0][1]), said[0][2]) == (hard, "1024")
    warnings = [line for line in proxy.lines if "WARNING" in line]
    if room >= CONNECTIONS:
        assert held.peak_open == CONNECTIONS and warnings == []
        assert summary["accept_limit_waits"] == 0
    else:
        assert held.peak_open == room and summary["accept_limit_waits"] >= 1
        assert len(warnings) == 2, warnings  # at start, and when the room first filled up
        assert f"leaves room for {room} connections, not the {CONNECTIONS}" in warnings[0]
    assert held.fds > 2 * held.peak_open
    assert summary["connections_total"] == CONNECTIONS
    assert summary["upstream_failures"] == summary["accept_failures"] == 0
    assert summary["bytes_client_to_server"] == summary["bytes_server_to_client"] == sum(
        len(_frame(i)) for i in range(CONNECTIONS)
    )
    assert summary["bytes_dropped"] == 0

    captured = {conn.client[1]: conn for conn in reassemble_captures(proxy.files())}
    assert len(captured) == CONNECTIONS
    for i, port in enumerate(held.ports):
        conn = captured[port]
        assert bytes(conn.sent) == bytes(conn.received) == _frame(i)
        assert conn.gaps == [] and (conn.client_end, conn.server_end) == ("fin", "fin")


def test_clients_past_the_limit_wait_rather_than_being_reset(tmp_path: Path) -> None:
    """With --max-connections 3, a fourth client is not accepted (so not reset) until one of
    the three closes; the wait is counted and said once."""

    async def scenario() -> tuple[ProxyProcess, dict[str, int], bool]:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Echo, "127.0.0.1", 0)
        upstream = server.sockets[0].getsockname()[:2]
        with capture_proxy(upstream, tmp_path / "caps", "--max-connections", "3") as proxy:
            streams = [await asyncio.open_connection("127.0.0.1", proxy.port) for _ in range(4)]
            for i, (_, writer) in enumerate(streams):
                writer.write(_frame(i))
            for reader, _ in streams[:3]:
                await reader.readexactly(len(_frame(0)))
            fourth_reader, fourth_writer = streams[3]
            try:
                await asyncio.wait_for(fourth_reader.readexactly(len(_frame(3))), 0.5)
                answered_while_full = True
            except TimeoutError:
                answered_while_full = False
            streams[0][1].close()
            assert await asyncio.wait_for(
                fourth_reader.readexactly(len(_frame(3))), 5
            ) == _frame(3)
            for _, writer in streams[1:]:
                writer.close()
            deadline = time.monotonic() + 10
            while proxy.stats().get("connections_total", 0) < 4 or proxy.stats().get(
                "connections_open"
            ):
                assert time.monotonic() < deadline, proxy.stats()
                await asyncio.sleep(0.05)
            summary = await loop.run_in_executor(None, proxy.stop)
        server.close()
        return proxy, summary, answered_while_full

    proxy, summary, answered_while_full = asyncio.run(scenario())
    assert not answered_while_full
    assert summary["connections_total"] == 4 and summary["accept_limit_waits"] >= 1
    assert summary["accept_failures"] == 0
    warnings = [line for line in proxy.lines if "as many as the proxy takes" in line]
    assert len(warnings) == 1 and "3 connections open" in warnings[0]


def test_an_accept_failing_for_want_of_descriptors_is_counted_and_retried(
    run: Callable, caplog: pytest.LogCaptureFixture
) -> None:
    """Three clients wait in the backlog while the proxy cannot open one more descriptor: the
    failed accept() is counted and logged once, and after the pause all three go through."""

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(await read_all(reader))
        writer.close()

    async def main() -> tuple[int, list[bytes]]:
        async with serving(echo) as upstream, proxied(None, upstream) as p:
            clients = [socket.create_connection((p.host, p.port)) for _ in range(3)]
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            lowest_free = os.dup(0)
            os.close(lowest_free)
            resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free, hard))  # no new one
            try:
                await asyncio.sleep(0.2)
            finally:
                resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
            failures = p.proxy.accept_counters.accept_failures
            answers = []
            for i, client in enumerate(clients):
                client.sendall(b"client %d" % i)
                client.shutdown(socket.SHUT_WR)
                reader, writer = await asyncio.open_connection(sock=client)
                answers.append(await asyncio.wait_for(read_all(reader), 5))
                writer.close()
            return failures, answers

    with caplog.at_level(logging.WARNING, logger="capture.accepting"):
        failures, answers = run(main())
    assert failures >= 1
    assert answers == [b"client 0", b"client 1", b"client 2"]
    told = [r.getMessage() for r in caplog.records if "accept() failed" in r.getMessage()]
    assert len(told) == 1 and "accept_failures" in told[0]


def test_a_failed_client_handshake_takes_no_place(run: Callable, tls_files: Any) -> None:
    """Clients that never complete the TLS handshake are closed by the loop and leave no
    connection counted as starting or open."""

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(await read_all(reader))
        writer.close()

    async def main() -> tuple[int, int]:
        tls = ClientTls(tls_files.cert, tls_files.key)
        async with serving(echo) as upstream, proxied(None, upstream, client_tls=tls) as p:
            for _ in range(3):
                reader, writer = await asyncio.open_connection(p.host, p.port)
                writer.write(b"CONNECT\naccept-version:1.2\n\n\x00" * 50)
                with contextlib.suppress(ConnectionError):
                    assert b"CONNECT" not in await asyncio.wait_for(read_all(reader), 5)
                writer.close()
            await asyncio.sleep(0.2)
            assert p.proxy.acceptor is not None
            return p.proxy.acceptor.starting, p.proxy.counters.connections_open

    assert run(main()) == (0, 0)


def test_a_hard_limit_too_low_for_max_connections_is_said_at_start(tmp_path: Path) -> None:
    with (
        bind_sockets("127.0.0.1", 0)[0] as upstream,
        capture_proxy(
            upstream.getsockname()[:2], tmp_path / "caps", "--max-connections", "5000",
            "--no-upstream-check", preexec_fn=_open_files_limit(200, 200),
        ) as proxy,
    ):
        deadline = time.monotonic() + 5
        while not any("connections at once" in line for line in proxy.lines):
            assert time.monotonic() < deadline, proxy.lines
            time.sleep(0.01)
        proxy.stop()
    [warning] = [line for line in proxy.lines if "leaves room for" in line]
    room = int(re.search(r"leaves room for (\d+) connections", warning)[1])  # type: ignore[index]
    assert 50 < room < 100 and "not the 5000 of max_connections" in warning
    assert any(f"up to {room} connections at once" in line for line in proxy.lines)


def test_room_for_connections_counts_two_descriptors_each() -> None:
    soft, room = connections_within_open_files_limit()
    assert soft == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert 0 < room < soft // 2
