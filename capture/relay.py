"""One relayed connection: client socket <-> upstream socket, teed to a recorder.

Bytes are forwarded as read. Flow control is per direction: when one side's write buffer
passes its high-water mark the other side stops being read until it drains. A FIN is passed
on as a FIN (half-close) where the transport allows it (not over TLS), a reset or error as
an RST. Capture problems are logged and never interrupt forwarding.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import ssl
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, cast

from capture.config import ListenerConfig, ProxyConfig
from capture.recorder import ConnectionRecorder
from capture.tcp_synth import endpoint
from pipeline.net import Direction, Endpoint

log = logging.getLogger(__name__)

WRITE_HIGH_WATER = 1 << 20
WRITE_LOW_WATER = 256 << 10
_LINGER_RESET = struct.pack("ii", 1, 0)


@dataclass(slots=True)
class ProxyCounters:
    connections_open: int = 0
    connections_total: int = 0
    bytes_client_to_server: int = 0
    bytes_server_to_client: int = 0
    upstream_failures: int = 0
    resets: int = 0
    connections_left_open: int = 0  # still open when the proxy stopped (marked in capture)


def reset(transport: asyncio.Transport | None) -> None:
    """Close with an RST (SO_LINGER 0) rather than a FIN."""
    if transport is None or transport.is_closing():
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
    transport.abort()


class RelayHost(Protocol):
    """What a relay needs from the proxy that accepted it."""

    config: ProxyConfig
    counters: ProxyCounters
    upstream_ssl: dict[ListenerConfig, ssl.SSLContext | None]
    reading_held: bool

    def hold_reading_if_backlogged(self) -> None: ...

    def new_recorder(
        self, client: Endpoint, server: Endpoint, syn_ts_ns: int
    ) -> ConnectionRecorder | None: ...

    def relay_opened(self, relay: Relay) -> None: ...

    def relay_finished(self, relay: Relay) -> None: ...


def endpoint_of(address: tuple | None) -> Endpoint | None:
    if not address:
        return None
    try:
        return endpoint(str(address[0]), int(address[1]))
    except ValueError:
        return None


class Half(asyncio.Protocol):
    """One socket of a relay; every event is handed to the relay."""

    __slots__ = (
        "relay",
        "direction",
        "transport",
        "eof",
        "closed",
        "shut",
        "reset_by_peer",
        "full",
    )

    def __init__(self, relay: Relay, direction: Direction) -> None:
        self.relay = relay
        self.direction = direction  # of the bytes read from this socket
        self.transport: asyncio.Transport | None = None
        self.eof = False  # the peer sent FIN
        self.closed = False  # connection_lost was called
        self.shut = False  # the proxy closed or reset this socket itself
        self.reset_by_peer = False
        self.full = False  # write buffer above its high-water mark

    @property
    def usable(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()

    def close(self) -> None:
        if self.usable:
            assert self.transport is not None
            self.shut = True
            self.transport.close()

    def reset(self) -> None:
        if self.usable:
            self.shut = True
            reset(self.transport)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it
        self.transport = cast(asyncio.Transport, transport)
        self.transport.set_write_buffer_limits(WRITE_HIGH_WATER, WRITE_LOW_WATER)
        self.relay.made(self)

    def data_received(self, data: bytes) -> None:
        self.relay.forward(self, data)

    def eof_received(self) -> bool:
        return self.relay.end_of_stream(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.relay.lost(self, exc)

    def pause_writing(self) -> None:
        self.full = True
        peer = self.relay.peer(self)
        if peer.usable:
            assert peer.transport is not None
            peer.transport.pause_reading()

    def resume_writing(self) -> None:
        self.full = False
        self.relay.peer(self).read_if_allowed()

    def read_if_allowed(self) -> None:
        """Resume reading unless the peer sent FIN, the peer's buffer is full, the capture is
        held, or (for the client) the upstream connection is not made yet."""
        relay = self.relay
        if (
            self.usable
            and not self.eof  # resuming after EOF would report the EOF again
            and not relay.peer(self).full
            and not relay.proxy.reading_held
            and not (self.direction is Direction.C2S and not relay.established)
        ):
            assert self.transport is not None
            self.transport.resume_reading()

    def hold(self) -> None:
        if self.usable:
            assert self.transport is not None
            self.transport.pause_reading()


class Relay:
    """One client connection and its upstream connection."""

    def __init__(self, proxy: RelayHost, listener: ListenerConfig) -> None:
        self.proxy = proxy
        self.listener = listener
        self.client = Half(self, Direction.C2S)
        self.upstream = Half(self, Direction.S2C)
        self.accepted_ns = 0
        self.established = False
        self.finished = False
        self.recorder: ConnectionRecorder | None = None
        self._early: list[tuple[int, bytes]] = []
        self._early_eof_ns: int | None = None
        self._connect_task: asyncio.Task[None] | None = None

    def peer(self, half: Half) -> Half:
        return self.upstream if half is self.client else self.client

    def hold_reading(self) -> None:
        self.client.hold()
        self.upstream.hold()

    def release_reading(self) -> None:
        self.client.read_if_allowed()
        self.upstream.read_if_allowed()

    # --- capture, shielded from forwarding ---------------------------------------------

    def _record(self, action: Callable[[ConnectionRecorder], None]) -> None:
        if self.recorder is None:
            return
        try:
            action(self.recorder)
        except Exception:
            self._capture_failed()

    def _capture_failed(self) -> None:
        log.exception("capture of a connection failed; it continues uncaptured")
        self.recorder = None

    # --- events ------------------------------------------------------------------------

    def made(self, half: Half) -> None:
        if half is self.upstream:
            self._upstream_made()
            return
        self.accepted_ns = time.time_ns()
        assert half.transport is not None
        half.transport.pause_reading()
        self.proxy.relay_opened(self)
        self._connect_task = asyncio.ensure_future(self._connect_upstream())
        self._connect_task.add_done_callback(self._connect_done)

    async def _connect_upstream(self) -> None:
        loop = asyncio.get_running_loop()
        target = self.listener.upstream
        tls = self.listener.upstream_tls
        try:
            await asyncio.wait_for(
                loop.create_connection(
                    lambda: self.upstream,
                    target.host,
                    target.port,
                    ssl=self.proxy.upstream_ssl[self.listener],
                    server_hostname=(tls.server_name or target.host) if tls else None,
                ),
                self.proxy.config.connect_timeout,
            )
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            self._upstream_failed(exc)

    def _connect_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("connecting upstream failed unexpectedly", exc_info=task.exception())
            self.client.reset()
        self._maybe_finish()

    def _upstream_failed(self, exc: BaseException) -> None:
        self.proxy.counters.upstream_failures += 1
        log.warning(
            "upstream %s unreachable for client %s: %s",
            self.listener.upstream,
            self._client_address(),
            exc or type(exc).__name__,
        )
        server = _literal_endpoint(self.listener.upstream.host, self.listener.upstream.port)
        client = endpoint_of(self._peername(self.client))
        if client is not None and server is not None and not self.client.closed:
            self.recorder = self.proxy.new_recorder(client, server, self.accepted_ns)
            self._record(lambda r: r.refused(self.accepted_ns, time.time_ns()))
        self.client.reset()
        self._maybe_finish()

    def _client_address(self) -> str:
        peer = self._peername(self.client)
        return f"{peer[0]}:{peer[1]}" if peer else "?"

    @staticmethod
    def _peername(half: Half) -> tuple | None:
        return half.transport.get_extra_info("peername") if half.transport else None

    def _upstream_made(self) -> None:
        established_ns = time.time_ns()
        if not self.client.usable:
            # the client went away while we were connecting: leave the same way
            if self.client.reset_by_peer:
                self.upstream.reset()
            else:
                self.upstream.close()
            return
        self.established = True
        client = endpoint_of(self._peername(self.client))
        server = endpoint_of(self._peername(self.upstream))
        if client is not None and server is not None:
            self.recorder = self.proxy.new_recorder(client, server, self.accepted_ns)
            self._record(lambda r: r.opened(self.accepted_ns, established_ns))
        early, self._early = self._early, []
        for ts_ns, data in early:
            self._relay(self.client, self.upstream, ts_ns, data)
        assert self.client.transport is not None
        if self._early_eof_ns is not None:
            self._pass_eof(self.client, self._early_eof_ns)
        else:
            self.client.read_if_allowed()
        if self.proxy.reading_held:
            self.upstream.hold()

    def forward(self, half: Half, data: bytes) -> None:
        ts_ns = time.time_ns()
        if not self.established:
            # uvloop starts reading right after connection_made whatever it asked for
            self._early.append((ts_ns, data))
            assert half.transport is not None
            half.transport.pause_reading()
            return
        self._relay(half, self.peer(half), ts_ns, data)

    def _relay(self, half: Half, target: Half, ts_ns: int, data: bytes) -> None:
        if not target.usable:
            return
        assert target.transport is not None
        target.transport.write(data)
        counters = self.proxy.counters
        if half.direction is Direction.C2S:
            counters.bytes_client_to_server += len(data)
        else:
            counters.bytes_server_to_client += len(data)
        recorder = self.recorder
        if recorder is not None:  # the hot path: no closure, same shielding as _record
            try:
                recorder.data(half.direction, ts_ns, data)
            except Exception:
                self._capture_failed()
            self.proxy.hold_reading_if_backlogged()

    def end_of_stream(self, half: Half) -> bool:
        half.eof = True
        if not self.established:
            self._early_eof_ns = time.time_ns()
            return True
        return self._pass_eof(half, time.time_ns())

    def _pass_eof(self, half: Half, ts_ns: int) -> bool:
        """Pass a FIN from ``half`` on; False when ``half`` should close now."""
        self._record(lambda r: r.fin(half.direction, ts_ns))
        target = self.peer(half)
        if target.usable:
            assert target.transport is not None
            if target.transport.can_write_eof():
                target.transport.write_eof()
            else:
                target.close()
                return self._close_if(half, True)
        if target.eof or not target.usable:
            target.close()
            return self._close_if(half, True)
        assert half.transport is not None
        # keep our side open so the peer's remaining data still reaches it (half-close);
        # TLS transports cannot do that and close anyway
        return self._close_if(half, not half.transport.can_write_eof())

    @staticmethod
    def _close_if(half: Half, close: bool) -> bool:
        """eof_received's answer; when replaying an early FIN nobody returns it, so close."""
        if close:
            half.close()
        return not close

    def lost(self, half: Half, exc: Exception | None) -> None:
        half.closed = True
        target = self.peer(half)
        if exc is not None:
            half.reset_by_peer = True
            self.proxy.counters.resets += 1
            self._record(lambda r: r.rst(half.direction, time.time_ns()))
            target.reset()
        else:
            if not half.eof and not half.shut:
                # closed without a FIN we saw (e.g. TLS without close_notify)
                self._record(lambda r: r.fin(half.direction, time.time_ns()))
            target.close()
        self._maybe_finish()

    def _maybe_finish(self) -> None:
        if self.finished:
            return
        upstream_done = self.upstream.closed or self.upstream.transport is None
        connecting = self._connect_task is not None and not self._connect_task.done()
        if self.client.closed and upstream_done and not connecting:
            self.finished = True
            self._record(lambda r: r.closed())
            self.proxy.relay_finished(self)

    def capture_ended(self, ts_ns: int) -> None:
        self._record(lambda r: r.still_open(ts_ns))

    def close(self) -> None:
        self.client.close()
        self.upstream.close()
        if self._connect_task is not None:
            self._connect_task.cancel()


def _literal_endpoint(host: str, port: int) -> Endpoint | None:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None
    return endpoint(host, port)
