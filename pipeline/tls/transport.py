"""TLS beneath a connection's transport (sans-IO): the TLS layer's plaintext is fed to the inner
transport (`pipeline.websocket.Transport`, which finds plain STOMP or WebSocket inside), and the
inner transport's events come back with the TCP offsets of the records that carried their bytes.

A connection is taken as TLS when its client's first bytes are a TLS handshake record
(`starts_tls`); the session row then says ``tls`` or ``websocket+tls``, and `TlsSeen` carries
what was negotiated and whether the connection could be decrypted.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace

from pipeline.net import Direction
from pipeline.tls.keylog import Secrets
from pipeline.tls.records import HANDSHAKE
from pipeline.tls.session import Plaintext, TlsAnomaly, TlsFacts, TlsSession
from pipeline.websocket import Transport
from pipeline.websocket.events import Control, Event, StompData, Violation

# Records whose plaintext offsets are remembered per direction, to give inner events their TCP
# offsets: a WebSocket frame longer than this many records gets the offset of the earliest kept.
MAX_RECORDS_MAPPED = 1 << 14


def starts_tls(data: bytes) -> bool:
    """Whether a client's first bytes are a TLS handshake record (SSL 3.0 to TLS 1.3)."""
    return len(data) >= 3 and data[0] == HANDSHAKE and data[1] == 3 and data[2] <= 4


@dataclass(slots=True, frozen=True)
class TlsSeen:
    """What the TLS handshake negotiated, once the connection is over."""

    ts_ns: int
    facts: TlsFacts


class _OffsetMap:
    """Plaintext offsets of one direction's records, and the TCP offsets of the records."""

    __slots__ = ("plain", "tcp")

    def __init__(self) -> None:
        self.plain: deque[int] = deque()
        self.tcp: deque[int] = deque()

    def add(self, plain_offset: int, tcp_offset: int) -> None:
        self.plain.append(plain_offset)
        self.tcp.append(tcp_offset)
        if len(self.plain) > MAX_RECORDS_MAPPED:
            self.plain.popleft()
            self.tcp.popleft()

    def tcp_of(self, plain_offset: int) -> int:
        index = bisect_right(self.plain, plain_offset) - 1
        return self.tcp[max(index, 0)] if self.tcp else 0


class TlsTransport:
    __slots__ = ("tls", "inner", "_maps", "_seen")

    def __init__(
        self, keys: Callable[[bytes], Secrets | None], inner: Transport | None = None
    ) -> None:
        self.tls = TlsSession(keys)
        self.inner = inner if inner is not None else Transport()
        self._maps = {Direction.C2S: _OffsetMap(), Direction.S2C: _OffsetMap()}
        self._seen = False

    @property
    def websocket(self) -> bool:
        return self.inner.websocket

    def receive(
        self, direction: Direction, ts_ns: int, tcp_offset: int, data: bytes
    ) -> list[Event]:
        out: list[Event] = []
        for event in self.tls.receive(direction, ts_ns, tcp_offset, data):
            if isinstance(event, Plaintext):
                self._maps[direction].add(event.offset, event.tcp_offset)
                inner = self.inner.receive(direction, ts_ns, event.offset, event.data)
                out += self._mapped(inner)
            else:
                out.append(_violation(event))
        return out

    def receive_gap(
        self, direction: Direction, ts_ns: int, tcp_offset: int, size: int
    ) -> list[Event]:
        gap = self.tls.receive_gap(direction, ts_ns, tcp_offset, size)
        return [_violation(e) for e in gap if isinstance(e, TlsAnomaly)]

    def receive_eof(self, direction: Direction, ts_ns: int) -> list[Event]:
        return self._mapped(self.inner.receive_eof(direction, ts_ns))

    def finish(self, ts_ns: int) -> list[Event | TlsSeen]:
        out: list[Event | TlsSeen] = [*self._mapped(self.inner.finish(ts_ns))]
        if not self._seen:
            self._seen = True
            out.append(TlsSeen(ts_ns, self.tls.finish()))
        return out

    def _mapped(self, events: list[Event]) -> list[Event]:
        """The inner events with the TCP offsets of their records in place of plaintext ones."""
        out: list[Event] = []
        for event in events:
            if isinstance(event, StompData):
                offsets = self._maps[Direction(event.direction)]
                frames = event.frames or ((event.stomp_offset, event.tcp_offset),)
                event = replace(
                    event,
                    tcp_offset=offsets.tcp_of(event.tcp_offset),
                    frames=tuple((stomp, offsets.tcp_of(plain)) for stomp, plain in frames),
                )
            elif (
                isinstance(event, Control | Violation)
                and event.direction is not None
                and event.tcp_offset is not None
            ):
                offsets = self._maps[Direction(event.direction)]
                event = replace(event, tcp_offset=offsets.tcp_of(event.tcp_offset))
            out.append(event)
        return out


def _violation(anomaly: TlsAnomaly) -> Violation:
    return Violation(
        anomaly.direction, anomaly.ts_ns, anomaly.tcp_offset, None, anomaly.kind, anomaly.detail
    )
