"""1,000 clients at once through `stomp-capture` to a real ActiveMQ: not a byte lost on the way
(sha256 at the client, in the capture), and the pipeline's tables over the capture agree with
what each client counted itself."""

from __future__ import annotations

import asyncio
import hashlib
import resource
from collections import Counter
from pathlib import Path
from typing import cast

import pytest

from pipeline.commands.run import RunConfig, run
from pipeline.lake import Lake, read_table
from tests.capture.aio_stomp import AioStompClient
from tests.capture.harness import reassemble_captures
from tests.capture.test_cli import ProxyProcess, capture_proxy
from tests.support.brokers import Broker

pytestmark = [pytest.mark.slow, pytest.mark.broker, pytest.mark.spark]

CLIENTS = 1000
MESSAGES = 4  # per client, to its own queue and back
CONNECTING_AT_ONCE = 100  # connection attempts in flight; all CLIENTS are then open together
DEADLINE_S = 240


def _bodies(client: int) -> list[bytes]:
    sizes = (0, 10, 700, 3000)
    return [
        hashlib.sha256(b"%d-%d" % (client, i)).digest() * (sizes[(client + i) % 4] // 32 + 1)
        for i in range(MESSAGES)
    ]


@pytest.fixture
def enough_open_files() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = CLIENTS + 200
    if soft < needed:
        if hard != resource.RLIM_INFINITY and hard < needed:
            pytest.skip(f"hard open files limit {hard} is below the {needed} this test needs")
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


async def _load(broker: Broker, proxy: ProxyProcess) -> tuple[list[AioStompClient], int]:
    """Every client connects (at most CONNECTING_AT_ONCE at a time); once the proxy reports all
    of them open at once, each subscribes to its own queue, sends, receives and disconnects."""
    connecting = asyncio.Semaphore(CONNECTING_AT_ONCE)
    opened: list[AioStompClient] = []
    all_open, go = asyncio.Event(), asyncio.Event()

    async def one(i: int) -> AioStompClient:
        async with connecting:
            client = await AioStompClient.connect(
                "127.0.0.1", proxy.port, login=broker.login, passcode=broker.passcode
            )
        opened.append(client)
        if len(opened) == CLIENTS:
            all_open.set()
        await go.wait()
        queue = f"/queue/load-{i}"
        await client.subscribe(queue)
        bodies = _bodies(i)
        for body in bodies:
            await client.send(queue, body)
        assert await client.receive_messages(MESSAGES) == bodies
        await client.disconnect()
        return client

    async def release_when_all_open() -> int:
        await all_open.wait()
        while (open_now := proxy.stats().get("connections_open", 0)) < CLIENTS:
            await asyncio.sleep(0.05)
        go.set()
        return open_now

    async with asyncio.timeout(DEADLINE_S):
        peak, *clients = await asyncio.gather(
            release_when_all_open(), *(one(i) for i in range(CLIENTS))
        )
    return cast(list[AioStompClient], clients), cast(int, peak)


def test_a_thousand_clients_at_once(
    activemq: Broker, tmp_path: Path, spark, enough_open_files: None
) -> None:
    out = tmp_path / "caps"
    with capture_proxy(activemq.address, out, "--buffer", "256M") as proxy:
        clients, peak = asyncio.run(_load(activemq, proxy))
        proxy.wait_for(lambda s: s.get("connections_open") == 0, timeout=60)
        summary = proxy.stop()

    assert peak == CLIENTS
    assert summary["connections_total"] == CLIENTS and summary["upstream_failures"] == 0
    assert summary["bytes_client_to_server"] == sum(c.sent.length for c in clients)
    assert summary["bytes_server_to_client"] == sum(c.received.length for c in clients)
    assert summary["bytes_dropped"] == 0

    captured = {conn.client[1]: conn for conn in reassemble_captures(proxy.files())}
    assert len(captured) == CLIENTS
    for client in clients:
        conn = captured[client.local_port]
        assert conn.gaps == []
        assert hashlib.sha256(conn.sent).hexdigest() == client.sent.sha256
        assert hashlib.sha256(conn.received).hexdigest() == client.received.sha256
        assert (conn.client_end, conn.server_end) != ("none", "none")

    lake = Lake(tmp_path / "lake")
    result = run(
        RunConfig(inputs=[out], lake=lake.root, close_open=True, validate=False),
        progress=lambda _: None,
    )
    assert result.counts["sessions"] == CLIENTS
    _tables_agree_with_the_clients(spark, lake, clients)


def _tables_agree_with_the_clients(spark, lake: Lake, clients: list[AioStompClient]) -> None:
    sessions = {
        row.client_port: row
        for row in read_table(spark, lake, "sessions")
        .select("session_id", "client_port", "c2s_bytes", "s2c_bytes", "c2s_frames",
                "s2c_frames", "messages_sent", "messages_delivered", "violations", "gap_bytes")
        .collect()
    }
    frames: dict[str, dict[str, Counter[str]]] = {}
    for row in (
        read_table(spark, lake, "frames").groupBy("session_id", "direction", "command").count()
    ).collect():
        by_direction = frames.setdefault(row.session_id, {"c2s": Counter(), "s2c": Counter()})
        by_direction[row.direction][row.command] = row["count"]
    bodies: dict[str, Counter[str]] = {}
    for row in (
        read_table(spark, lake, "messages")
        .where("command = 'SEND'")
        .select("session_id", "body_sha256")
        .collect()
    ):
        bodies.setdefault(row.session_id, Counter())[row.body_sha256] += 1

    assert len(sessions) == CLIENTS
    for i, client in enumerate(clients):
        session = sessions[client.local_port]
        assert (session.violations, session.gap_bytes) == (0, 0)
        assert (session.c2s_bytes, session.s2c_bytes) == (
            client.sent.length, client.received.length
        )
        assert session.c2s_frames == sum(client.sent.frames.values())
        assert session.s2c_frames == sum(client.received.frames.values())
        assert (session.messages_sent, session.messages_delivered) == (MESSAGES, MESSAGES)
        by_direction = frames[session.session_id]
        assert by_direction["c2s"] == client.sent.frames
        assert by_direction["s2c"] == client.received.frames
        expected = Counter(hashlib.sha256(body).hexdigest() for body in _bodies(i))
        assert bodies[session.session_id] == expected
