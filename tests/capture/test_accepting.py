"""How many clients `stomp-capture` takes at once: 10,000 held open through it (its open files
limit raised by the proxy itself), and clients past its limit waiting rather than reset."""

from __future__ import annotations

import asyncio
import re
import resource
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from capture.accepting import bind_sockets, connections_within_open_files_limit
from tests.capture.harness import reassemble_captures
from tests.capture.test_cli import ProxyProcess, capture_proxy

CONNECTIONS = 10_000
CONNECTING_AT_ONCE = 500
OPEN_FILES = 65_536  # each proxied connection costs the proxy two descriptors, the test two
DEADLINE_S = 60


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


@pytest.fixture
def many_open_files() -> None:
    """The test's own clients and echo server need two descriptors a connection too."""
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))
    except (OSError, ValueError) as exc:
        pytest.skip(f"cannot raise the open files limit to {OPEN_FILES}: {exc}")
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, before)


def _proxy_usage(pid: int) -> tuple[int, int]:
    """(resident memory in bytes, open descriptors) of a process."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss_kb = int(re.search(r"VmRSS:\s+(\d+) kB", status)[1])  # type: ignore[index]
    return rss_kb * 1024, len(list(Path(f"/proc/{pid}/fd").iterdir()))


async def _hold_connections(proxy: ProxyProcess) -> tuple[list[int], tuple[int, int]]:
    """Open CONNECTIONS clients through the proxy, each echoing one frame, all held open until
    the proxy counts them all; then close them all. Returns their ports and the proxy's usage
    while they were open."""
    connecting = asyncio.Semaphore(CONNECTING_AT_ONCE)
    writers: list[asyncio.StreamWriter] = []
    ports: list[int] = [0] * CONNECTIONS

    async def one(i: int) -> None:
        async with connecting:
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writers.append(writer)
            ports[i] = writer.get_extra_info("sockname")[1]
            writer.write(_frame(i))
            assert await reader.readexactly(len(_frame(i))) == _frame(i)

    async with asyncio.timeout(DEADLINE_S):
        await asyncio.gather(*(one(i) for i in range(CONNECTIONS)))
        while proxy.stats().get("connections_open", 0) < CONNECTIONS:
            await asyncio.sleep(0.05)
        usage = _proxy_usage(proxy.process.pid)
        for writer in writers:
            writer.close()
        await asyncio.gather(*(writer.wait_closed() for writer in writers))
    return ports, usage


@pytest.mark.slow
def test_ten_thousand_connections_at_once(
    tmp_path: Path, many_open_files: None, record_property: Callable[[str, object], None]
) -> None:
    """The proxy starts with a soft limit of 1024 open files under a hard one of 65,536,
    raises its own soft limit, and relays and captures 10,000 connections held at once."""

    async def scenario() -> tuple[ProxyProcess, list[int], tuple[int, int], dict[str, int]]:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Echo, "127.0.0.1", 0, backlog=4096)
        upstream = server.sockets[0].getsockname()[:2]
        with capture_proxy(
            upstream, tmp_path / "caps", "--max-connections", str(CONNECTIONS),
            preexec_fn=_open_files_limit(1024, OPEN_FILES),
        ) as proxy:
            ports, usage = await _hold_connections(proxy)
            deadline = time.monotonic() + 20
            while proxy.stats().get("connections_open", 0):
                assert time.monotonic() < deadline, proxy.stats()
                await asyncio.sleep(0.05)
            summary = await loop.run_in_executor(None, proxy.stop)
        server.close()
        return proxy, ports, usage, summary

    started = time.monotonic()
    proxy, ports, (rss, fds), summary = asyncio.run(scenario())
    record_property("proxy_rss_bytes", rss)
    record_property("proxy_open_fds", fds)
    print(f"10,000 connections: proxy RSS {rss / 1e6:.0f} MB, {fds} descriptors open,"
          f" {time.monotonic() - started:.1f} s")

    assert any(
        f"open files limit {OPEN_FILES} (raised from 1024): up to" in line for line in proxy.lines
    ), proxy.lines
    assert not any("WARNING" in line for line in proxy.lines), proxy.lines
    assert fds > 2 * CONNECTIONS
    assert summary["connections_total"] == CONNECTIONS
    assert summary["upstream_failures"] == summary["accept_failures"] == 0
    assert summary["bytes_client_to_server"] == summary["bytes_server_to_client"] == sum(
        len(_frame(i)) for i in range(CONNECTIONS)
    )
    assert summary["bytes_dropped"] == 0

    captured = {conn.client[1]: conn for conn in reassemble_captures(proxy.files())}
    assert len(captured) == CONNECTIONS
    for i, port in enumerate(ports):
        conn = captured[port]
        assert bytes(conn.sent) == bytes(conn.received) == _frame(i)
        assert conn.gaps == [] and conn.client_end == "fin"


def test_clients_past_the_limit_wait_rather_than_being_reset(tmp_path: Path) -> None:
    """With --max-connections 3, a fourth client is not accepted (so not reset) until one of
    the three closes; the wait is counted and said once."""

    async def scenario() -> tuple[ProxyProcess, dict[str, int], bool]:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Echo, "127.0.0.1", 0)
        upstream = server.sockets[0].getsockname()[:2]
        with capture_proxy(upstream, tmp_path / "caps", "--max-connections", "3") as proxy:
            streams = [await asyncio.open_connection("127.0.0.1", proxy.port) for _ in range(4)]
            for i, (reader, writer) in enumerate(streams):
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
