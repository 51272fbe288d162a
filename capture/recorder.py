"""Turns one relayed connection's events into pcapng records for a capture sink.

Sans-IO: the proxy reports what happened (opened, bytes read, FIN, RST) with the time it
happened; this keeps the synthetic TCP conversation and hands encoded blocks to the sink.
When the sink has no room the bytes are skipped in sequence space, so the loss shows up as
a gap in the capture, and a capture-loss block placed where the gap is says which connection
and direction lost how many bytes, so a reader can tell capture loss from a network gap.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from capture.pcapng import block_length, capture_loss_block, enhanced_packet_block_parts
from capture.tcp_synth import IsnGenerator, SynthPacket, TcpConversation, common_family
from capture.writer import CaptureRecord, LossTally
from pipeline.net import Direction, Endpoint

# per-segment framing a data record adds to its payload: EPB 32 + Ethernet 14 + IPv6 40 +
# TCP 20 + padding 3
SEGMENT_OVERHEAD = 112
BUFFER_FULL = "buffer_full"
STILL_OPEN_COMMENT = "stomp-capture: connection still open when the capture ended"
_PROCESS_ISNS = IsnGenerator()


DIRECTION_NAMES = {Direction.C2S: "client_to_server", Direction.S2C: "server_to_client"}


def endpoint_text(endpoint: Endpoint) -> str:
    return str(endpoint)


def loss_record(
    detail: str, flow: str = "", loss: LossTally | None = None, reason: str = ""
) -> CaptureRecord:
    """A capture-loss block; ``loss`` is what it records, kept by the sink if the block
    cannot be written."""
    block = capture_loss_block(detail)
    return CaptureRecord((block,), len(block), flow=flow, loss=loss, loss_reason=reason)


@dataclass(slots=True)
class PendingLoss:
    """Bytes of one direction skipped since the last captured chunk."""

    first_ts_ns: int
    seq: int
    size: int = 0
    chunks: int = 0
    last_ts_ns: int = 0


class CaptureSink(Protocol):
    on_drained: Callable[[], None] | None

    def has_room(self, size: int) -> bool: ...

    def backlogged(self) -> bool: ...

    def offer(self, records: list[CaptureRecord], essential: bool = False) -> bool: ...

    def drop(self, payload: int) -> None: ...


class ChunkFilter(Protocol):
    """Rewrites a direction's bytes before capture, keeping their length (e.g. masking)."""

    def feed(self, ts_ns: int, data: bytes) -> list[tuple[int, bytes]]: ...

    def flush(self) -> list[tuple[int, bytes]]: ...


def _record(packet: SynthPacket, comment: str = "", flow: str = "") -> CaptureRecord:
    parts = enhanced_packet_block_parts(packet.ts_ns, packet.parts, comment=comment)
    return CaptureRecord(parts, block_length(parts), len(packet.payload), flow, packet.ts_ns)


class ConnectionRecorder:
    __slots__ = ("_conv", "_sink", "_filters", "_ended", "_losses", "_flows")

    def __init__(
        self,
        sink: CaptureSink,
        client: Endpoint,
        server: Endpoint,
        client_filter: ChunkFilter | None = None,
        isn: tuple[int, int] | None = None,
        syn_ts_ns: int | None = None,
    ) -> None:
        """``isn`` (client, server) defaults to numbers derived per connection from the
        4-tuple and ``syn_ts_ns`` (default: now) with a key random to this process."""
        if isn is None:
            ts_ns = time.time_ns() if syn_ts_ns is None else syn_ts_ns
            isn = _PROCESS_ISNS.pair(*common_family(client, server), ts_ns)
        self._conv = TcpConversation(client, server, isn[0], isn[1])
        self._sink = sink
        self._filters: dict[Direction, ChunkFilter] = {}
        if client_filter is not None:
            self._filters[Direction.C2S] = client_filter
        self._ended = False
        self._losses: dict[Direction, PendingLoss] = {}
        label = (
            f"client={endpoint_text(self._conv.client)} server={endpoint_text(self._conv.server)}"
        )
        self._flows = {way: f"{label} direction={name}" for way, name in DIRECTION_NAMES.items()}

    @property
    def conversation(self) -> TcpConversation:
        return self._conv

    def _control(self, packets: list[SynthPacket], comment: str = "") -> None:
        if not self._ended:
            last = len(packets) - 1
            records = [_record(p, comment if i == last else "") for i, p in enumerate(packets)]
            self._sink.offer(records, essential=True)

    def opened(self, syn_ts_ns: int, established_ts_ns: int) -> None:
        self._control(self._conv.handshake(syn_ts_ns, established_ts_ns))

    def refused(self, syn_ts_ns: int, ts_ns: int) -> None:
        """The upstream connection could not be made: SYN answered by RST."""
        self._control([self._conv.syn(syn_ts_ns), self._conv.refused(ts_ns)])
        self._ended = True

    def data(self, direction: Direction, ts_ns: int, payload: bytes) -> None:
        if self._ended or not payload:
            return
        flt = self._filters.get(direction)
        pieces = flt.feed(ts_ns, payload) if flt is not None else [(ts_ns, payload)]
        for piece_ts, piece in pieces:
            self._capture(direction, piece_ts, piece)

    def _capture(self, direction: Direction, ts_ns: int, payload: bytes) -> None:
        segments = len(payload) // self._conv.max_payload + 1
        seq = self._conv.next_seq(direction)
        if not self._sink.has_room(len(payload) + segments * SEGMENT_OVERHEAD):
            self._conv.skip(direction, len(payload))
            self._sink.drop(len(payload))
            self._note_loss(direction, ts_ns, seq, len(payload))
            return
        if direction in self._losses:
            self._record_loss(direction)
        flow = self._flows[direction]
        records = [
            _record(packet, flow=flow) for packet in self._conv.data(direction, ts_ns, payload)
        ]
        if not self._sink.offer(records):  # refused after all: counted by the sink
            self._note_loss(direction, ts_ns, seq, len(payload))

    def _note_loss(self, direction: Direction, ts_ns: int, seq: int, size: int) -> None:
        loss = self._losses.get(direction)
        if loss is None:
            loss = self._losses[direction] = PendingLoss(ts_ns, seq)
        loss.size += size
        loss.chunks += 1
        loss.last_ts_ns = ts_ns

    def _record_loss(self, direction: Direction) -> None:
        """Write the capture-loss block for a gap that just ended (data resumed or the
        direction ended), placed in the file where the gap is."""
        loss = self._losses.pop(direction)
        flow = self._flows[direction]
        detail = (
            f"{flow} seq={loss.seq} bytes={loss.size} ts_ns={loss.first_ts_ns}"
            f" last_ts_ns={loss.last_ts_ns} reason={BUFFER_FULL}"
        )
        tally = LossTally(loss.size, loss.chunks, loss.first_ts_ns, loss.last_ts_ns)
        self._sink.offer([loss_record(detail, flow, tally, BUFFER_FULL)], essential=True)

    def _flush(self, direction: Direction) -> None:
        flt = self._filters.pop(direction, None)
        if flt is not None:
            for piece_ts, piece in flt.flush():
                self._capture(direction, piece_ts, piece)
        if direction in self._losses:
            self._record_loss(direction)

    def fin(self, direction: Direction, ts_ns: int) -> None:
        if not self._ended:
            self._flush(direction)
            self._control([self._conv.fin(direction, ts_ns)])

    def rst(self, direction: Direction, ts_ns: int) -> None:
        if not self._ended:
            self._flush(direction)
            if direction.reverse in self._losses:
                self._record_loss(direction.reverse)
            self._control([self._conv.rst(direction, ts_ns)])
            self._ended = True

    def closed(self) -> None:
        """Both sides are done; nothing more is recorded."""
        if not self._ended:
            for direction in list(self._losses):
                self._record_loss(direction)
        self._ended = True

    def still_open(self, ts_ns: int) -> None:
        """Capture ends while the connection is open: mark it so, with no FIN or RST."""
        if not self._ended:
            for direction in Direction:
                self._flush(direction)
            self._control([self._conv.ack(Direction.C2S, ts_ns)], STILL_OPEN_COMMENT)
            self._ended = True
