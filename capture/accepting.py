"""Accepting clients within the open files limit.

Every relayed connection holds two descriptors (client and upstream). An event loop's own
server accepts until accept() fails with EMFILE, and then libuv (uvloop) accepts and closes
the waiting clients to drain its backlog: they see a reset and nothing is counted. Here the
proxy accepts itself: it stops accepting while ``capacity`` connections are open, so clients
past the limit wait in the listen backlog until some close, and an accept() that still
fails for want of descriptors is counted and logged, then retried after a pause.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import resource
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

LISTEN_BACKLOG = 4096
ACCEPTS_PER_WAKEUP = 128
RETRY_AFTER_RESOURCE_ERROR_S = 0.5
SPARE_DESCRIPTORS = 32  # capture files being rotated, TLS key logs, logging, the resolver
OUT_OF_RESOURCES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


@dataclass(slots=True)
class AcceptCounters:
    accept_limit_waits: int = 0  # times accepting paused with ``capacity`` connections open
    accept_failures: int = 0  # accept() failed for want of descriptors or memory


def open_descriptors() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 64


def connections_within_open_files_limit() -> tuple[int, int]:
    """(soft open files limit, connections it leaves room for beside what is open now)."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return soft, max(1, (soft - open_descriptors() - SPARE_DESCRIPTORS) // 2)


def bind_sockets(host: str, port: int) -> list[socket.socket]:
    """Listening sockets for every address ``host`` resolves to (as asyncio's own server)."""
    infos = socket.getaddrinfo(
        host, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0, socket.AI_PASSIVE
    )
    sockets: list[socket.socket] = []
    seen: set[tuple[int, tuple]] = set()
    try:
        for family, kind, proto, _, address in infos:
            if (family, address) in seen:
                continue
            seen.add((family, address))
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(LISTEN_BACKLOG)
            sock.setblocking(False)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


@dataclass(slots=True)
class Acceptor:
    """Accepts on ``sockets`` and hands each client to ``connect``'s protocol factory while
    fewer than ``capacity`` connections are open (``open_now()``)."""

    loop: asyncio.AbstractEventLoop
    capacity: int
    open_now: Callable[[], int]
    counters: AcceptCounters
    listening: list[tuple[socket.socket, Callable[[], asyncio.Protocol], ssl.SSLContext | None]] = (
        field(default_factory=list)
    )
    starting: int = 0  # accepted, not yet handed to its protocol (e.g. in the TLS handshake)
    paused: bool = False
    retry: asyncio.TimerHandle | None = None
    closed: bool = False
    told_limit: bool = False
    told_failure: bool = False

    def add(
        self,
        sock: socket.socket,
        factory: Callable[[], asyncio.Protocol],
        ssl_context: ssl.SSLContext | None,
    ) -> None:
        self.listening.append((sock, factory, ssl_context))
        if not self.paused:
            self.loop.add_reader(sock.fileno(), self._accept, len(self.listening) - 1)

    def full(self) -> bool:
        return self.open_now() + self.starting >= self.capacity

    def _accept(self, index: int) -> None:
        sock, factory, ssl_context = self.listening[index]
        for attempt in range(ACCEPTS_PER_WAKEUP):
            if self.full():
                if attempt == 0:  # woken for a client that has no room: it waits
                    self._at_capacity()
                return  # else whether one waits shows at the next wake-up
            try:
                conn, _ = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in OUT_OF_RESOURCES:
                    self._out_of_resources(exc)
                    return
                continue  # e.g. ECONNABORTED: that client is gone
            self._start(conn, factory, ssl_context)

    def _start(
        self,
        conn: socket.socket,
        factory: Callable[[], asyncio.Protocol],
        ssl_context: ssl.SSLContext | None,
    ) -> None:
        conn.setblocking(False)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.starting += 1
        task = asyncio.ensure_future(
            self.loop.connect_accepted_socket(factory, conn, ssl=ssl_context)
        )

        def started(task: asyncio.Future) -> None:
            self.starting -= 1
            if task.cancelled() or task.exception() is not None:
                # the loop closed the socket with its transport (uvloop detaches it)
                log.debug("a client connection failed to start (e.g. its TLS handshake)")
            self.connection_ended()

        task.add_done_callback(started)

    def _at_capacity(self) -> None:
        self.counters.accept_limit_waits += 1
        if not self.told_limit:
            self.told_limit = True
            soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            log.warning(
                "%d connections open, as many as the proxy takes (open files limit %d);"
                " more clients wait in the listen backlog until some close",
                self.capacity, soft,
            )
        self._pause()

    def _out_of_resources(self, exc: OSError) -> None:
        self.counters.accept_failures += 1
        if not self.told_failure:
            self.told_failure = True
            log.warning(
                "accept() failed with %d connections open: %s; accepting again in %g s"
                " (counted as accept_failures)",
                self.open_now(), exc.strerror or exc, RETRY_AFTER_RESOURCE_ERROR_S,
            )
        self._pause()
        if self.retry is None:
            self.retry = self.loop.call_later(RETRY_AFTER_RESOURCE_ERROR_S, self._retry)

    def _retry(self) -> None:
        self.retry = None
        self.connection_ended()

    def _pause(self) -> None:
        if self.paused:
            return
        self.paused = True
        for sock, _, _ in self.listening:
            self.loop.remove_reader(sock.fileno())

    def connection_ended(self) -> None:
        """A connection closed: accept again if that made room."""
        if not self.paused or self.closed or self.retry is not None or self.full():
            return
        self.paused = False
        for index, (sock, _, _) in enumerate(self.listening):
            self.loop.add_reader(sock.fileno(), self._accept, index)

    def close(self) -> None:
        self._pause()
        self.closed = True
        if self.retry is not None:
            self.retry.cancel()
            self.retry = None
        for sock, _, _ in self.listening:
            sock.close()
