"""TLS beneath a connection's transport (sans-IO): the TLS layer's plaintext is fed to the inner
transport (`pipeline.websocket.Transport`, which finds plain STOMP or WebSocket inside), and the
inner transport's events come back with the TCP offsets of the records that carried their bytes.

A connection is taken as TLS when its client's first bytes are a TLS handshake record
(`starts_tls`), or, in a capture that starts mid-connection, when its first bytes are a TLS
record (`looks_like_tls`); the session row then says ``tls`` or ``websocket+tls``, and `facts`
what was negotiated and whether the connection could be decrypted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from pipeline.compiled import set_slot_values, slot_values
from pipeline.net import Direction
from pipeline.session import SessionModel
from pipeline.tls.keylog import Secrets, task_secrets
from pipeline.tls.offsets import MAX_RECORDS_MAPPED, RecordOffsets
from pipeline.tls.records import HANDSHAKE
from pipeline.tls.session import Plaintext, TlsAnomaly, TlsFacts, TlsSession
from pipeline.websocket import Transport, apply
from pipeline.websocket.events import Control, Event, StompData, Violation
from pipeline.websocket.transport import TCP


def starts_tls(data: bytes) -> bool:
    """Whether a client's first bytes are a TLS handshake record (SSL 3.0 to TLS 1.3)."""
    return len(data) >= 3 and data[0] == HANDSHAKE and data[1] == 3 and data[2] <= 4


def looks_like_tls(data: bytes) -> bool:
    """Whether bytes seen first in a capture that starts mid-connection begin a TLS record."""
    return len(data) >= 5 and 20 <= data[0] <= 24 and data[1] == 3 and data[2] <= 4


class TlsTransport:
    """TLS, then the inner transport. ``state`` is never the inner transport's TCP: every byte
    goes through `receive`."""

    __slots__ = ("tls", "inner", "_maps", "runs")
    state = "TLS"

    def __init__(
        self,
        keys: Callable[[bytes], Secrets | None] = task_secrets,
        inner: Transport | None = None,
    ) -> None:
        """``keys``: where the secrets are looked up by client random; by default the key log
        the flow-pass task was given (`pipeline.tls.keylog.use_keylog`)."""
        self.tls = TlsSession(keys)
        self.inner = inner if inner is not None else Transport()
        self._maps = {Direction.C2S: RecordOffsets(), Direction.S2C: RecordOffsets()}
        # Whether packets may come in runs (`receive_run`): plain STOMP inside, both
        # directions past the handshake with nothing failed. Known again after each `receive`,
        # the only way these change.
        self.runs = False

    def __getstate__(self) -> tuple[None, dict[str, object]]:
        return slot_values(self)

    def __setstate__(self, state: tuple[None, dict[str, object]]) -> None:
        set_slot_values(self, state)

    @property
    def websocket(self) -> bool:
        return self.inner.websocket

    def _check_runs(self) -> None:
        tls = self.tls
        self.runs = (
            self.inner.state == TCP
            and tls.takes_run(Direction.C2S)
            and tls.takes_run(Direction.S2C)
        )

    def receive(
        self, direction: Direction, ts_ns: int, tcp_offset: int, data: bytes
    ) -> list[Event]:
        out: list[Event] = []
        plain: list[bytes] = []
        start = first_tcp = -1
        offsets = self._maps[direction]
        for event in self.tls.receive(direction, ts_ns, tcp_offset, data):
            if isinstance(event, Plaintext):
                offsets.add(event.offset, event.tcp_offset)
                if not plain:
                    start, first_tcp = event.offset, event.tcp_offset
                plain.append(event.data)
            else:
                out.append(_violation(event))
        if plain:
            # The records a TCP chunk completed go on as one piece, as plain TCP's bytes do
            joined = plain[0] if len(plain) == 1 else b"".join(plain)
            if self.inner.state == TCP:  # plain STOMP inside: the inner transport would pass it
                # on (its frames' TCP offsets come from `tcp_offsets`, which the model is given)
                out.insert(0, StompData(direction, ts_ns, start, first_tcp, joined, False, ()))
            else:
                out[:0] = self._mapped(self.inner.receive(direction, ts_ns, start, joined))
        self._check_runs()
        return out

    def receive_run(
        self,
        model: SessionModel,
        direction: Direction,
        tcp_offset: int,
        data: bytes,
        sizes: list[int],
        timestamps: list[int],
        sources: list[tuple[str, int]],
    ) -> None:
        """`receive` of consecutive packets of one direction joined in ``data`` (their
        ``sizes``, capture times and sources), their events applied to ``model``. While the
        direction is past its handshake and carries plain STOMP, the records are opened in
        bulk and their plaintext goes to the model as one run (`SessionModel.on_data_run`),
        each packet with the plaintext of the records it completed."""
        taken = 0
        if self.runs:
            offsets = self._maps[direction]
            start, plain, plain_sizes, taken = self.tls.open_run(
                direction, data, sizes, timestamps, offsets.plain, offsets.tcp
            )
            if len(offsets.plain) > 2 * MAX_RECORDS_MAPPED:
                offsets.trim()
            if plain:
                times, origins = timestamps, sources
                if 0 in plain_sizes or taken < len(sizes):  # packets that completed no record
                    kept = [i for i, size in enumerate(plain_sizes) if size]
                    plain_sizes = [plain_sizes[i] for i in kept]
                    times = [timestamps[i] for i in kept]
                    origins = [sources[i] for i in kept]
                model.on_data_run(direction, start, plain, plain_sizes, times, origins)
            if taken == len(sizes):
                return
            # the record that stopped the run, and the rest of its packet, are held: read them
            # the record-by-record way with that packet's time
            at = tcp_offset + sum(sizes[: taken + 1])
            apply(model, self.receive(direction, timestamps[taken], at, b""), sources[taken])
            taken += 1
        at = sum(sizes[:taken])
        for index in range(taken, len(sizes)):
            size = sizes[index]
            piece = data[at : at + size]
            events = self.receive(direction, timestamps[index], tcp_offset + at, piece)
            apply(model, events, sources[index])
            at += size

    @property
    def tcp_offsets(self) -> dict[str, RecordOffsets]:
        """Each direction's plaintext offsets and the TCP offsets of the records that carried
        them (`RecordOffsets.tcp_of`), for the model's frames of plain STOMP inside TLS."""
        return {str(direction): offsets for direction, offsets in self._maps.items()}

    def receive_gap(
        self, direction: Direction, ts_ns: int, tcp_offset: int, size: int
    ) -> list[Event]:
        gap = self.tls.receive_gap(direction, ts_ns, tcp_offset, size)
        self._check_runs()
        return [_violation(e) for e in gap if isinstance(e, TlsAnomaly)]

    def receive_eof(self, direction: Direction, ts_ns: int) -> list[Event]:
        return self._mapped(self.inner.receive_eof(direction, ts_ns))

    def finish(self, ts_ns: int) -> list[Event]:
        return self._mapped(self.inner.finish(ts_ns))

    @property
    def facts(self) -> TlsFacts:
        """What was negotiated, and whether the connection was decrypted (final once the
        connection is over)."""
        return self.tls.finish()

    def _mapped(self, events: list[Event]) -> list[Event]:
        """The inner events with the TCP offsets of their records in place of plaintext ones."""
        out: list[Event] = []
        for event in events:
            if isinstance(event, StompData):
                offsets = self._maps[Direction(event.direction)]
                if event.frames or self.inner.websocket:
                    frames = event.frames or ((event.stomp_offset, event.tcp_offset),)
                    carried = tuple((stomp, offsets.tcp_of(plain)) for stomp, plain in frames)
                else:  # plain STOMP: the STOMP stream is the plaintext stream
                    carried = offsets.records(event.stomp_offset, len(event.data))
                event = StompData(
                    event.direction,
                    event.ts_ns,
                    event.stomp_offset,
                    carried[0][1],
                    event.data,
                    event.whole_message,
                    carried[1:],  # the first piece's offset is tcp_offset's
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
