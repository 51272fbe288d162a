"""Helpers for the capture tests: an in-process proxy, plain TCP peers, and what the
pipeline's own reader and reassembler make of capture files."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from capture.config import ClientTls, HostPort, ListenerConfig, ProxyConfig, UpstreamTls
from capture.proxy import CaptureProxy
from capture.writer import CaptureWriter
from pipeline.ingest import CaptureAnomaly, CaptureReader
from pipeline.reassembly import Closed, Data, Gap, Opened, Segment
from tests.support.local_reassembly import LocalReassembly

LOOPBACK_ANY_PORT = HostPort("127.0.0.1", 0)
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@dataclass(slots=True)
class CapturedConnection:
    """One connection as the pipeline's reader and reassembler see it in capture files."""

    client: tuple[str, int]
    server: tuple[str, int]
    role_source: str
    client_end: str = "none"
    server_end: str = "none"
    sent: bytearray = field(default_factory=bytearray)  # client -> server, gaps as zeros
    received: bytearray = field(default_factory=bytearray)
    gaps: list[tuple[bool, int, int]] = field(default_factory=list)  # from_client, offset, size
    first_ts_ns: int = 0


def reassemble_captures(paths: Iterable[Path]) -> list[CapturedConnection]:
    """Every connection of the files in capture order; the files must read without anomaly."""
    reassembly = LocalReassembly([str(p) for p in paths])
    by_id: dict[str, CapturedConnection] = {}
    order: list[CapturedConnection] = []
    for event in reassembly:
        if isinstance(event, Opened):
            conn = event.connection
            captured = CapturedConnection(
                conn.client, conn.server, conn.role_source, first_ts_ns=conn.first_ts_ns
            )
            by_id[conn.connection_id] = captured
            order.append(captured)
        elif isinstance(event, Segment):
            captured = by_id[event.connection_id]
            inner = event.event
            if isinstance(inner, Data):
                buf = captured.sent if event.from_client else captured.received
                if len(buf) < inner.offset:
                    buf.extend(bytes(inner.offset - len(buf)))  # a gap: zeros
                buf[inner.offset : inner.offset + len(inner.data)] = inner.data
            elif isinstance(inner, Gap):
                captured.gaps.append((event.from_client, inner.offset, inner.size))
        elif isinstance(event, Closed):
            captured = by_id[event.connection.connection_id]
            captured.client_end = event.connection.client_end
            captured.server_end = event.connection.server_end
    assert [a for _, a in reassembly.anomalies if a.kind != "capture_loss"] == []
    return order


def capture_losses(paths: Iterable[Path]) -> list[CaptureAnomaly]:
    """The capture-loss records of the files, as the pipeline's reader reports them."""
    losses = []
    for path in paths:
        with CaptureReader(str(path)) as reader:
            losses += [
                item for item in reader
                if isinstance(item, CaptureAnomaly) and item.kind == "capture_loss"
            ]
    return losses


def loss_fields(anomaly: CaptureAnomaly) -> dict[str, str]:
    return dict(field.partition("=")[::2] for field in anomaly.detail.split())


@dataclass(slots=True)
class Proxied:
    proxy: CaptureProxy
    writer: CaptureWriter | None
    host: str
    port: int

    async def stop(self, drain: float = 0.0, hurry: asyncio.Event | None = None) -> list[Path]:
        await self.proxy.stop(drain, hurry)
        if self.writer is None:
            return []
        await asyncio.get_running_loop().run_in_executor(None, self.writer.close)
        return list(self.writer.files)


@asynccontextmanager
async def proxied(
    out: Path | None,
    upstream: HostPort,
    listen: HostPort = LOOPBACK_ANY_PORT,
    client_tls: ClientTls | None = None,
    upstream_tls: UpstreamTls | None = None,
    writer: CaptureWriter | None = None,
) -> AsyncIterator[Proxied]:
    """A proxy capturing to ``out`` (or through ``writer``, a writer of the caller's)."""
    listener = ListenerConfig(listen, upstream, client_tls, upstream_tls)
    if writer is not None:
        out = writer.out_dir
    config = ProxyConfig(listeners=(listener,), out_dir=out, connect_timeout=5)
    if writer is None and out is not None:
        writer = CaptureWriter(out)
    if writer is not None:
        writer.start()
    proxy = CaptureProxy(config, writer)
    [bound] = await proxy.start()
    host, port = bound.addresses[0][:2]
    harness = Proxied(proxy, writer, host, port)
    try:
        yield harness
    finally:
        await harness.stop()


@asynccontextmanager
async def serving(handler: Handler, **kwargs: Any) -> AsyncIterator[HostPort]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0, **kwargs)
    try:
        yield HostPort("127.0.0.1", server.sockets[0].getsockname()[1])
    finally:
        server.close()


async def read_all(reader: asyncio.StreamReader) -> bytes:
    chunks = []
    while chunk := await reader.read(1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def abort_with_rst(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
