"""A connection's transport: plain STOMP over TCP, or STOMP over WebSocket (sans-IO).

Fed the two reassembled TCP byte streams of one connection (``receive``, ``receive_gap``,
``receive_eof``, then ``finish``), it returns events: STOMP bytes with their STOMP-stream and
TCP-stream offsets, WebSocket control frames, violations and the handshake record.

Until the client's first bytes tell (``GET`` with ``Upgrade: websocket``), they are held back.
A connection that is not WebSocket yields ``NotWebSocket`` and from then on every byte comes out
as it went in (``stomp_offset == tcp_offset``). A WebSocket connection yields ``HandshakeSeen``
once the response is read; only after a 101 choosing a STOMP subprotocol (or none) are data
messages decoded as STOMP. A capture that starts mid-connection, or whose server speaks first,
is taken as plain TCP. So is an upgrade left undecided past ``max_held`` bytes in a direction
(request head not ended, or no response): an anomaly, then every byte held and later is STOMP
over TCP.
"""

from __future__ import annotations

from collections import deque

from pipeline.net import Direction
from pipeline.websocket import violations as v
from pipeline.websocket.deframer import Deframer
from pipeline.websocket.events import (
    Control,
    Event,
    HandshakeSeen,
    NotWebSocket,
    StompData,
    StompGap,
    Violation,
)
from pipeline.websocket.handshake import (
    MAX_HEAD,
    STOMP_SUBPROTOCOLS,
    Head,
    deflate_parameters,
    head_end,
    is_upgrade,
    parse_head,
    starts_like_get,
    status_of,
)

SNIFFING = "SNIFFING"  # waiting for the client's first bytes to tell
TCP = "TCP"  # plain STOMP: bytes pass through
AWAITING_RESPONSE = "AWAITING_RESPONSE"  # request read, response not yet
OPEN = "OPEN"  # WebSocket with STOMP inside: frames are decoded
IGNORED = "IGNORED"  # refused upgrade, other subprotocol, unreadable handshake: nothing decoded

MAX_PINGS_KEPT = 64  # unanswered pings remembered per direction for round-trip times


class Transport:
    __slots__ = (
        "state",
        "handshake",
        "max_held",
        "_held",
        "_held_bytes",
        "_request",
        "_request_end",
        "_request_scanned",
        "_response",
        "_response_scanned",
        "_deframers",
        "_pings",
        "_ignored_bytes",
        "_request_ns",
    )

    def __init__(self, *, mid_stream: bool = False, max_held: int = MAX_HEAD) -> None:
        """``max_held``: bytes held per direction while the upgrade is undecided (request head
        not ended, or no response yet); past it the connection is taken as plain TCP."""
        self.state = TCP if mid_stream else SNIFFING
        self.handshake: HandshakeSeen | None = None
        self.max_held = max_held
        self._held: list[tuple[Direction, int, int, bytes]] = []  # (direction, ts, offset, data)
        self._held_bytes = {Direction.C2S: 0, Direction.S2C: 0}
        self._request = bytearray()
        self._request_end = -1
        self._request_scanned = 0  # the request was searched for its end up to here
        self._response = bytearray()
        self._response_scanned = 0
        self._deframers: dict[Direction, Deframer] = {}
        self._pings: dict[Direction, deque[tuple[bytes, int]]] = {
            Direction.C2S: deque(),
            Direction.S2C: deque(),
        }
        self._ignored_bytes = 0
        self._request_ns: int | None = None

    @property
    def websocket(self) -> bool:
        return self.state in (AWAITING_RESPONSE, OPEN, IGNORED)

    # ---- input ---------------------------------------------------------------------------------

    def receive(
        self, direction: Direction, ts_ns: int, tcp_offset: int, data: bytes
    ) -> list[Event]:
        state = self.state
        if state == TCP:
            return [StompData(direction, ts_ns, tcp_offset, tcp_offset, data, False)]
        if state == OPEN:
            return self._deframed(direction, self._deframers[direction].feed(data, ts_ns))
        if state == IGNORED:
            self._ignored_bytes += len(data)
            return []
        self._held.append((direction, ts_ns, tcp_offset, data))
        self._held_bytes[direction] += len(data)
        if state == SNIFFING:
            out = self._sniff(direction, ts_ns, data)
        else:
            out = self._await_response(direction, ts_ns, data)
        if self.state in (SNIFFING, AWAITING_RESPONSE):
            return out + self._bounded(ts_ns)
        return out

    def receive_gap(
        self, direction: Direction, ts_ns: int, tcp_offset: int, size: int
    ) -> list[Event]:
        state = self.state
        if state == SNIFFING:
            out = self._decide_tcp(ts_ns)
            return [*out, StompGap(direction, ts_ns, tcp_offset, size)]
        if state == TCP:
            return [StompGap(direction, ts_ns, tcp_offset, size)]
        if state == OPEN:
            return self._deframers[direction].feed_gap(size, ts_ns)
        if state == AWAITING_RESPONSE:
            detail = f"{size} bytes missing during the upgrade: nothing decoded"
            gap = Violation(direction, ts_ns, tcp_offset, None, v.GAP, detail)
            return [*self._ignore(ts_ns), gap]
        return []

    def receive_eof(self, direction: Direction, ts_ns: int) -> list[Event]:
        if self.state == OPEN:
            return self._deframers[direction].feed_eof(ts_ns)
        return []

    def finish(self, ts_ns: int) -> list[Event]:
        """The connection is over: decide what is still undecided."""
        if self.state == SNIFFING:
            return self._decide_tcp(ts_ns)
        if self.state == AWAITING_RESPONSE:
            return self._ignore(ts_ns)
        return []

    # ---- handshake -----------------------------------------------------------------------------
    # Each byte held is looked at once: the heads grow by appending and are searched for their
    # end from where the last search stopped, so an undecided upgrade costs linear time.

    def _sniff(self, direction: Direction, ts_ns: int, data: bytes) -> list[Event]:
        first = self._held[0]
        if first[0] != Direction.C2S or first[2] != 0:
            return self._decide_tcp(ts_ns)  # server first, or mid-stream: not an upgrade
        if direction != Direction.C2S:
            return []  # the server speaking before the request ended decides nothing
        request = self._request
        request += data
        if not starts_like_get(request):
            return self._decide_tcp(ts_ns)
        end = head_end(request, self._request_scanned)
        self._request_scanned = max(len(request) - 3, 0)
        if end < 0:
            return []
        if not is_upgrade(request[:end]):
            return self._decide_tcp(ts_ns)
        self._request_end = end
        self._request_ns = first[1]
        self.state = AWAITING_RESPONSE
        response = self._response
        for held_direction, _, _, held_data in self._held:
            if held_direction == Direction.S2C:
                response += held_data
        return self._response_head(ts_ns)

    def _await_response(self, direction: Direction, ts_ns: int, data: bytes) -> list[Event]:
        if direction != Direction.S2C:
            return []
        self._response += data
        return self._response_head(ts_ns)

    def _response_head(self, ts_ns: int) -> list[Event]:
        response = self._response
        end = head_end(response, self._response_scanned)
        self._response_scanned = max(len(response) - 3, 0)
        if end < 0:
            return []
        head = parse_head(bytes(response[:end]))
        if head is None or status_of(head) is None:
            return self._ignore(ts_ns, "unreadable response status line")
        return self._open(ts_ns, head, end)

    def _bounded(self, ts_ns: int) -> list[Event]:
        """An undecided upgrade holds at most ``max_held`` bytes per direction: past that it
        is an anomaly and the connection is plain TCP, every byte held going to STOMP."""
        for direction in (Direction.C2S, Direction.S2C):
            held = self._held_bytes[direction]
            if held <= self.max_held:
                continue
            if self.state == SNIFFING:
                what = "the upgrade request head did not end"
            elif direction == Direction.C2S:
                what = "the upgrade request had no response"
            else:
                what = "the upgrade response head did not end"
            detail = (
                f"{what} within {self.max_held} bytes ({held} {direction} bytes held): "
                "decoded as STOMP over TCP"
            )
            out: list[Event] = [Violation(direction, ts_ns, 0, None, v.UPGRADE_UNFINISHED, detail)]
            return out + self._decide_tcp(ts_ns)
        return []

    def _decide_tcp(self, ts_ns: int) -> list[Event]:
        self.state = TCP
        out: list[Event] = [NotWebSocket(ts_ns)]
        out += [StompData(d, ts, offset, offset, data, False) for d, ts, offset, data in self._held]
        self._held = []
        self._held_bytes = {Direction.C2S: 0, Direction.S2C: 0}
        self._request = bytearray()
        self._response = bytearray()
        return out

    def _open(self, ts_ns: int, response: Head, response_end: int) -> list[Event]:
        request = parse_head(bytes(self._request[: self._request_end]))
        assert request is not None
        status = status_of(response)
        chosen = response.get("sec-websocket-protocol")
        extensions = response.tokens("sec-websocket-extensions")
        out: list[Event] = []
        stomp = status == 101
        if status != 101:
            detail = f"upgrade answered {status} {response.start[2]}".strip()
            out.append(Violation(Direction.S2C, ts_ns, 0, None, v.UPGRADE_REFUSED, detail))
        elif chosen is not None and chosen.lower() not in STOMP_SUBPROTOCOLS:
            stomp = False
            detail = f"subprotocol {chosen!r} chosen: not decoded as STOMP"
            out.append(Violation(Direction.S2C, ts_ns, 0, None, v.NOT_STOMP, detail))
        self.handshake = self._seen(
            ts_ns, request, chosen, ", ".join(extensions) or None, status, stomp
        )
        out.insert(0, self.handshake)
        held, self._held = self._held, []
        self._held_bytes = {Direction.C2S: 0, Direction.S2C: 0}
        if not stomp:
            self.state = IGNORED
            self._request = bytearray()
            self._response = bytearray()
            return out
        self.state = OPEN
        deflate = deflate_parameters(extensions)
        self._deframers = {
            Direction.C2S: Deframer(
                Direction.C2S, from_client=True, deflate=deflate, tcp_offset=self._request_end
            ),
            Direction.S2C: Deframer(
                Direction.S2C, from_client=False, deflate=deflate, tcp_offset=response_end
            ),
        }
        skip = {Direction.C2S: self._request_end, Direction.S2C: response_end}
        for direction, ts, offset, data in held:
            cut = skip[direction] - offset
            if cut >= len(data):
                continue
            data = data[max(cut, 0) :]
            out += self._deframed(direction, self._deframers[direction].feed(data, ts))
        self._request = bytearray()
        self._response = bytearray()
        return out

    def _seen(
        self,
        ts_ns: int,
        request: Head,
        chosen: str | None,
        extensions: str | None,
        status: int | None,
        stomp: bool,
    ) -> HandshakeSeen:
        """The handshake record: what the request offered, and what the answer chose."""
        return HandshakeSeen(
            ts_ns,
            request.start[1],
            request.get("host"),
            request.get("origin"),
            request.get("user-agent"),
            request.get("sec-websocket-protocol"),
            chosen,
            request.get("sec-websocket-extensions"),
            extensions,
            status,
            stomp,
            self._request_ns,
        )

    def _ignore(self, ts_ns: int, problem: str | None = None) -> list[Event]:
        out: list[Event] = []
        if self.handshake is None and self._request_end >= 0:
            request = parse_head(bytes(self._request[: self._request_end]))
            assert request is not None
            self.handshake = self._seen(ts_ns, request, None, None, None, False)
            out.append(self.handshake)
        if problem is not None:
            out.append(Violation(Direction.S2C, ts_ns, 0, None, v.BAD_HANDSHAKE, problem))
        self.state = IGNORED
        self._held = []
        self._held_bytes = {Direction.C2S: 0, Direction.S2C: 0}
        self._request = bytearray()
        self._response = bytearray()
        return out

    # ---- frames --------------------------------------------------------------------------------

    def _deframed(self, direction: Direction, events: list[Event]) -> list[Event]:
        """Pongs get the round-trip time of the ping they answer (same payload, other side)."""
        for index, event in enumerate(events):
            if type(event) is not Control:
                continue
            if event.kind == "ping":
                pings = self._pings[direction]
                pings.append((event.payload, event.ts_ns))
                if len(pings) > MAX_PINGS_KEPT:
                    pings.popleft()
            elif event.kind == "pong":
                pings = self._pings[direction.reverse]
                for position, (payload, ts) in enumerate(pings):
                    if payload == event.payload:
                        del pings[position]
                        events[index] = _with_rtt(event, event.ts_ns - ts)
                        break
        return events


def _with_rtt(event: Control, rtt_ns: int) -> Control:
    return Control(
        event.direction,
        event.ts_ns,
        event.tcp_offset,
        event.kind,
        event.payload_length,
        event.payload,
        event.close_code,
        event.close_reason,
        rtt_ns,
    )
