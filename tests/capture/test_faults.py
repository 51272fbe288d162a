"""Faults around the capture proxy, across capture/ modules (relay, recorder, writer, cli): a
broker restarted under open sessions, a disk too slow for the traffic, a disk that fills up.
Forwarding must fail only where a direct connection fails too, loss must be counted, and every
capture file left behind must read cleanly.

The other faults are tested where their module is: an unreachable upstream and resets in
test_relay.py; a client killed mid-frame, a broker going away, a full disk, SIGTERM with open
connections and drain in test_cli.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from capture.config import HostPort
from capture.writer import PARTIAL_SUFFIX, CaptureRecord, CaptureWriter
from tests.capture.aio_stomp import AioStompClient, StompError
from tests.capture.conftest import SmallDisk
from tests.capture.harness import (
    capture_losses,
    loss_fields,
    proxied,
    reassemble_captures,
    serving,
)
from tests.capture.test_cli import HashingRelay, capture_proxy
from tests.support.brokers import Broker, free_port, running_broker


async def _client(broker: Broker, port: int, **kwargs: object) -> AioStompClient:
    return await AioStompClient.connect(
        "127.0.0.1", port, login=broker.login, passcode=broker.passcode,
        vhost=broker.vhost or "localhost", **kwargs,  # type: ignore[arg-type]
    )


async def _how_it_ends(client: AioStompClient, timeout: float = 30) -> str:
    """How the broker side ended the session: "eof", "reset" or "error" (an ERROR frame); the
    client then closes its side too."""
    try:
        async with asyncio.timeout(timeout):
            while await client.read_frame() is not None:
                pass
    except ConnectionResetError:
        return "reset"
    except StompError:
        return "error"
    finally:
        client.writer.close()
    return "eof"


# --- a broker restart -------------------------------------------------------------------------


@pytest.mark.broker
@pytest.mark.slow
def test_a_broker_restart_mid_session(tmp_path: Path) -> None:
    """Sessions open through the proxy end as a direct one does when the broker stops; while it
    is down a client is reset; once it is back new sessions work, all without touching the
    proxy, and the capture holds every connection."""
    port = free_port()
    out = tmp_path / "caps"
    with contextlib.ExitStack() as first_broker:
        broker = first_broker.enter_context(running_broker("activemq", stomp_port=port))
        with capture_proxy(broker.address, out, "--connect-timeout", "3") as proxy:

            async def scenario() -> tuple[dict[str, str], AioStompClient, str, AioStompClient]:
                loop = asyncio.get_running_loop()
                direct = await _client(broker, port)
                through = await _client(broker, proxy.port, keep_bytes=True)
                for i, client in enumerate((direct, through)):
                    await client.subscribe(f"/queue/restart-{i}")
                    await client.send(f"/queue/restart-{i}", b"before the restart")
                    assert await client.receive_messages(1) == [b"before the restart"]

                await loop.run_in_executor(None, first_broker.close)  # SIGTERM, as operators do
                endings = {
                    "direct": await _how_it_ends(direct),
                    "proxied": await _how_it_ends(through),
                }
                with pytest.raises(ConnectionRefusedError):
                    await asyncio.open_connection(*broker.address)
                try:
                    await _client(broker, proxy.port)
                    while_down = "connected"
                except (ConnectionError, StompError) as exc:
                    while_down = type(exc).__name__

                with running_broker("activemq", stomp_port=port) as again:
                    after = await _client(again, proxy.port, keep_bytes=True)
                    await after.subscribe("/queue/after")
                    await after.send("/queue/after", b"after the restart")
                    assert await after.receive_messages(1) == [b"after the restart"]
                    await after.disconnect()
                return endings, through, while_down, after

            endings, through, while_down, after = asyncio.run(scenario())
            proxy.wait_for(lambda s: s.get("connections_open") == 0)
            summary = proxy.stop()

    assert endings["proxied"] == endings["direct"], endings
    assert while_down == "ConnectionResetError"
    assert summary["connections_total"] == 3 and summary["upstream_failures"] == 1
    assert summary["bytes_dropped"] == 0
    assert not list(out.glob("*" + PARTIAL_SUFFIX))
    captured = {conn.client[1]: conn for conn in reassemble_captures(proxy.files())}
    assert len(captured) == 3
    for client in (through, after):
        conn = captured[client.local_port]
        assert bytes(conn.sent) == client.sent.data
        assert bytes(conn.received) == client.received.data
        assert conn.gaps == []
    ending = {"eof": "fin", "reset": "rst"}.get(endings["proxied"])
    assert captured[through.local_port].server_end == ending
    assert (captured[after.local_port].client_end, captured[after.local_port].server_end) == (
        "fin", "fin"
    )
    [refused] = [c for port, c in captured.items() if port not in (through.local_port,
                                                                    after.local_port)]
    assert refused.server_end == "rst" and refused.sent == b""


# --- a slow disk ------------------------------------------------------------------------------

WRITE_DELAY_S = 0.2
SLOW_BUFFER = 128 << 10


class SlowDiskWriter(CaptureWriter):
    """Each write takes WRITE_DELAY_S more before it reaches the file, as on a disk or network
    mount that cannot keep up; the writes themselves are real, into real capture files."""

    def _writev_all(self, chunk: list[CaptureRecord]) -> None:
        time.sleep(WRITE_DELAY_S)
        super()._writev_all(chunk)


def _bodies(count: int, size: int) -> list[bytes]:
    return [hashlib.sha256(b"%d" % i).digest() * (size // 32) for i in range(count)]


@pytest.mark.broker
def test_a_slow_disk_loses_capture_not_traffic(
    activemq: Broker, tmp_path: Path, run: Callable
) -> None:
    bodies = _bodies(200, 32 << 10)
    total = 2 * sum(map(len, bodies))
    # if forwarding waited for the disk, the exchange could go no faster than the disk
    disk_bound_s = total / (SLOW_BUFFER / WRITE_DELAY_S)
    relay = HashingRelay(activemq.address)  # what the broker side sends and receives
    writer = SlowDiskWriter(tmp_path, buffer_bytes=SLOW_BUFFER)

    async def main() -> tuple[AioStompClient, list[bytes], float, int, list[Path]]:
        upstream = HostPort(*relay.address)
        async with proxied(None, upstream, writer=writer) as p:
            client = await _client(activemq, p.port, keep_bytes=True)
            await client.subscribe("/queue/slow-disk")
            started = time.monotonic()

            async def produce() -> None:
                for body in bodies:
                    await client.send("/queue/slow-disk", body)

            _, received = await asyncio.gather(produce(), client.receive_messages(len(bodies)))
            elapsed = time.monotonic() - started
            await client.disconnect()
            await asyncio.sleep(0.1)
            counters = p.proxy.counters
            forwarded = counters.bytes_client_to_server + counters.bytes_server_to_client
            return client, received, elapsed, forwarded, await p.stop()

    client, received, elapsed, forwarded, files = run(main())
    assert received == bodies
    assert relay.hashes() == [(client.sent.sha256, client.received.sha256)]
    relay.close()
    assert elapsed < disk_bound_s / 2, (elapsed, disk_bound_s)

    counted = writer.counters
    assert counted.bytes_dropped > 0 and counted.write_errors == 0
    assert forwarded == client.sent.length + client.received.length
    assert counted.bytes_captured + counted.bytes_dropped == forwarded

    [path] = files
    assert not list(tmp_path.glob("*" + PARTIAL_SUFFIX))
    [conn] = reassemble_captures([path])
    assert conn.gaps and sum(size for _, _, size in conn.gaps) == counted.bytes_dropped
    # each gap is recorded in the file as capture loss, with its connection and direction
    losses = [loss_fields(loss) for loss in capture_losses([path])]
    assert sum(int(loss["bytes"]) for loss in losses) == counted.bytes_dropped
    assert {loss["client"] for loss in losses} == {f"127.0.0.1:{client.local_port}"}
    assert {loss["direction"] for loss in losses} <= {"client_to_server", "server_to_client"}
    assert all(loss["reason"] == "buffer_full" for loss in losses)
    assert client.sent.data is not None and client.received.data is not None
    for from_client, offset, size in conn.gaps:
        original = client.sent.data if from_client else client.received.data
        original[offset : offset + size] = bytes(size)
    assert bytes(conn.sent) == client.sent.data[: len(conn.sent)]
    assert bytes(conn.received) == client.received.data[: len(conn.received)]
    assert (conn.client_end, conn.server_end) != ("none", "none")


@pytest.mark.broker
def test_a_slow_disk_in_lossless_mode_slows_traffic_and_loses_nothing(
    activemq: Broker, tmp_path: Path, run: Callable
) -> None:
    """With lossless capture the proxy stops reading while the writer is behind: the exchange
    goes at the disk's pace, every byte both ways is in the capture, nothing is dropped."""
    bodies = _bodies(100, 32 << 10)
    relay = HashingRelay(activemq.address)
    writer = SlowDiskWriter(tmp_path, buffer_bytes=1 << 20, lossless=True)

    async def main() -> tuple[AioStompClient, list[bytes], int, list[Path]]:
        async with proxied(None, HostPort(*relay.address), writer=writer) as p:
            client = await _client(activemq, p.port, keep_bytes=True)
            await client.subscribe("/queue/slow-disk-lossless")

            async def produce() -> None:
                for body in bodies:
                    await client.send("/queue/slow-disk-lossless", body)

            _, received = await asyncio.gather(produce(), client.receive_messages(len(bodies)))
            await client.disconnect()
            await asyncio.sleep(0.1)
            counters = p.proxy.counters
            forwarded = counters.bytes_client_to_server + counters.bytes_server_to_client
            return client, received, forwarded, await p.stop()

    client, received, forwarded, files = run(main())
    assert received == bodies
    assert relay.hashes() == [(client.sent.sha256, client.received.sha256)]
    relay.close()
    counted = writer.counters
    assert counted.backlog_waits > 0  # the writer was behind and forwarding waited for it
    assert counted.bytes_dropped == 0 and counted.bytes_captured == forwarded
    [conn] = reassemble_captures(files)
    assert conn.gaps == [] and capture_losses(files) == []
    assert bytes(conn.sent) == client.sent.data
    assert bytes(conn.received) == client.received.data


# --- a full disk (a real 2 MiB tmpfs: tests/capture/conftest.py small_disk) ------------------

DISK_FULL_WAIT_S = 1.0
PACED_CHUNK = 64 << 10


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(1 << 16):
        writer.write(data)
        await writer.drain()
    writer.close()


def test_a_full_disk_in_lossless_mode_holds_traffic_only_for_a_while(
    small_disk: SmallDisk, run: Callable
) -> None:
    """Lossless mode, the capture disk fills mid-exchange and stays full: forwarding is held
    for disk_full_wait, then goes on with every byte intact while capture data is dropped;
    once space returns the loss is written as capture-loss blocks, and forwarded = captured +
    recorded as lost, gap for gap."""
    payload = b"".join(_bodies(64, 32 << 10))  # 2 MiB, sent in paced chunks
    writer = CaptureWriter(
        small_disk.mount / "caps", lossless=True, disk_full_wait=DISK_FULL_WAIT_S
    )

    async def main() -> tuple[bytes, float, float, int, int, list[Path]]:
        async with serving(_echo) as upstream, proxied(None, upstream, writer=writer) as p:
            small_disk.fill(leave=200_000)
            reader, client = await asyncio.open_connection(p.host, p.port)
            port = client.get_extra_info("sockname")[1]
            started = time.monotonic()
            arrivals: list[float] = []

            async def send() -> None:
                for at in range(0, len(payload), PACED_CHUNK):
                    client.write(payload[at : at + PACED_CHUNK])
                    await client.drain()
                    await asyncio.sleep(0.01)
                client.write_eof()

            async def receive() -> bytes:
                chunks = []
                while chunk := await reader.read(1 << 16):
                    arrivals.append(time.monotonic())
                    chunks.append(chunk)
                return b"".join(chunks)

            async with asyncio.timeout(60):
                _, echoed = await asyncio.gather(send(), receive())
            elapsed = time.monotonic() - started
            times = [started, *arrivals]
            longest_pause = max(later - sooner for sooner, later in itertools.pairwise(times))
            client.close()
            await asyncio.sleep(0.1)
            counters = p.proxy.counters
            forwarded = counters.bytes_client_to_server + counters.bytes_server_to_client
            small_disk.free()
            return echoed, elapsed, longest_pause, forwarded, port, await p.stop()

    echoed, elapsed, longest_pause, forwarded, port, files = run(main())
    assert echoed == payload and forwarded == 2 * len(payload)
    counted = writer.counters
    assert (counted.disk_full_waits, counted.disk_full_timeouts) == (1, 1)
    # held once, for about disk_full_wait, then never again
    assert DISK_FULL_WAIT_S * 0.8 <= longest_pause < DISK_FULL_WAIT_S + 5, longest_pause
    assert elapsed < DISK_FULL_WAIT_S + 30
    assert counted.bytes_dropped > 0
    assert counted.bytes_captured + counted.bytes_dropped == forwarded
    assert counted.bytes_loss_recorded == counted.bytes_dropped
    assert writer.unrecorded_losses() == []
    losses = [loss_fields(loss) for loss in capture_losses(files)]
    assert sum(int(loss["bytes"]) for loss in losses) == counted.bytes_dropped
    assert {(loss["client"], loss["reason"]) for loss in losses} == {
        (f"127.0.0.1:{port}", "write_failed")
    }
    [conn] = reassemble_captures(files)
    assert sum(size for _, _, size in conn.gaps) == counted.bytes_dropped
    for from_client, offset, size in conn.gaps:  # both ways carry the payload (an echo)
        gapped = conn.sent if from_client else conn.received
        gapped.extend(bytes(max(0, offset + size - len(gapped))))  # a gap at the end
        assert gapped[offset : offset + size] == bytes(size)
        gapped[offset : offset + size] = payload[offset : offset + size]
    assert bytes(conn.sent) == payload == bytes(conn.received)
