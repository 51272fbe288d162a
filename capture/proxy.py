"""The proxy: listeners that accept clients and relay each one to its upstream broker."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass

from capture.accepting import (
    AcceptCounters,
    Acceptor,
    bind_sockets,
    connections_within_open_files_limit,
)
from capture.config import ListenerConfig, ProxyConfig
from capture.recorder import CaptureSink, ChunkFilter, ConnectionRecorder
from capture.relay import Half, ProxyCounters, Relay
from capture.tcp_synth import IsnGenerator, common_family
from capture.tls import client_ssl_context, upstream_ssl_context
from pipeline.net import Endpoint

log = logging.getLogger(__name__)


@dataclass(slots=True)
class BoundListener:
    config: ListenerConfig
    addresses: list[tuple[str, int]]
    sockets: list[socket.socket]


class CaptureProxy:
    def __init__(
        self,
        config: ProxyConfig,
        sink: CaptureSink | None,
        client_filter: Callable[[], ChunkFilter] | None = None,
    ) -> None:
        self.config = config
        self.sink = sink
        self.client_filter = client_filter
        self.counters = ProxyCounters()
        self.accept_counters = AcceptCounters()
        self.acceptor: Acceptor | None = None
        self.open_files_limit = 0
        self.capacity = 0  # connections open at once: the configured most, within the limit
        self.isns = IsnGenerator()
        self.relays: set[Relay] = set()
        self.listeners: list[BoundListener] = []
        self.upstream_ssl: dict[ListenerConfig, ssl.SSLContext | None] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self.reading_held = False  # lossless capture: sockets are not read until it drains

    def hold_reading_if_backlogged(self) -> None:
        """Lossless capture: when the writer is behind, stop reading every socket (the
        kernel's buffers then push back on the peers) until it has drained."""
        if self.reading_held or self.sink is None or not self.sink.backlogged():
            return
        self.reading_held = True
        for relay in self.relays:
            relay.hold_reading()

    def release_reading(self) -> None:
        if not self.reading_held:
            return
        self.reading_held = False
        for relay in list(self.relays):
            relay.release_reading()

    def new_recorder(
        self, client: Endpoint, server: Endpoint, syn_ts_ns: int
    ) -> ConnectionRecorder | None:
        if self.sink is None:
            return None
        flt = self.client_filter() if self.client_filter is not None else None
        client, server = common_family(client, server)
        isn = self.isns.pair(client, server, syn_ts_ns)
        return ConnectionRecorder(self.sink, client, server, flt, isn=isn)

    def relay_opened(self, relay: Relay) -> None:
        self.relays.add(relay)
        self.counters.connections_open += 1
        self.counters.connections_total += 1
        self._idle.clear()

    def relay_finished(self, relay: Relay) -> None:
        self.relays.discard(relay)
        self.counters.connections_open -= 1
        if not self.relays:
            self._idle.set()
        if self.acceptor is not None:
            self.acceptor.connection_ended()

    def _size_capacity(self) -> None:
        """How many connections to take at once: ``max_connections`` if the open files limit
        leaves room for it, else what the limit allows (said once, as a warning)."""
        self.open_files_limit, room = connections_within_open_files_limit()
        wanted = self.config.max_connections
        self.capacity = room if wanted is None else min(wanted, room)
        if wanted is not None and wanted > room:
            log.warning(
                "the open files limit %d leaves room for %d connections, not the %d of"
                " max_connections; raise the hard limit (ulimit -Hn, LimitNOFILE=) to take more",
                self.open_files_limit, room, wanted,
            )

    async def start(self) -> list[BoundListener]:
        """Bind every listener (only the addresses given); raises OSError if one cannot."""
        loop = asyncio.get_running_loop()
        self._size_capacity()
        acceptor = Acceptor(
            loop, self.capacity, lambda: self.counters.connections_open, self.accept_counters
        )
        self.acceptor = acceptor
        if self.sink is not None:

            def drained() -> None:
                loop.call_soon_threadsafe(self.release_reading)

            self.sink.on_drained = drained
        for listener in self.config.listeners:
            self.upstream_ssl[listener] = upstream_ssl_context(listener)

            def factory(listener: ListenerConfig = listener) -> Half:
                return Relay(self, listener).client

            try:
                sockets = bind_sockets(listener.listen.host, listener.listen.port)
            except OSError:
                acceptor.close()
                raise
            ssl_context = client_ssl_context(listener)
            for sock in sockets:
                acceptor.add(sock, factory, ssl_context)
            addresses = [sock.getsockname()[:2] for sock in sockets]
            self.listeners.append(BoundListener(listener, addresses, sockets))
        return self.listeners

    async def stop(self, drain_seconds: float = 0.0, hurry: asyncio.Event | None = None) -> None:
        """Stop accepting, let open connections finish for up to ``drain_seconds`` (or until
        ``hurry`` is set), then mark the rest as open in the capture and close them."""
        if self.acceptor is not None:
            self.acceptor.close()
        if drain_seconds > 0 and self.relays:
            waits = [asyncio.ensure_future(self._idle.wait())]
            if hurry is not None:
                waits.append(asyncio.ensure_future(hurry.wait()))
            _, pending = await asyncio.wait(
                waits, timeout=drain_seconds, return_when=asyncio.FIRST_COMPLETED
            )
            for task in pending:
                task.cancel()
        ts_ns = time.time_ns()
        self.counters.connections_left_open = len(self.relays)
        for relay in list(self.relays):
            relay.capture_ended(ts_ns)
            relay.close()
        # let the transports run their close callbacks
        for _ in range(3):
            await asyncio.sleep(0)
