"""Sans-IO connection tracking over the packets of ONE 4-tuple, in capture-time order.

The caller groups packets by `canonical_key` (across files), sorts each group by capture time
and feeds it to a ConnectionTracker with the captured payload of every packet.

Connections: a SYN starts a new connection unless it repeats the current one's SYN (same
sender, same ISN) while that connection is still going; a SYN-ACK starts one when it cannot
belong to the current connection; a data segment far outside the stream after the current
connection closed (FIN both ways or RST) starts one too (a reuse whose handshake was not
captured).  Port reuse: once the current connection has ended in either direction (a FIN or a
RST was seen), or has been idle for longer than `reuse_after_idle_ns` (default 120 s, more than
the largest gap between SYN retransmissions of common stacks: Linux backs off to 64 s), a SYN
or SYN-ACK starts a new connection whatever its ISN: a client that binds the same local port
again, or a capture proxy that gives every connection the same ISNs, is not a retransmission.

Roles: the SYN sender is the client ("syn"); else the SYN-ACK sender is the server
("syn_ack"); else the endpoint on a configured broker port is the server ("broker_port");
else the sender of the first packet is taken as client and role_source is "unknown": the
caller decides from the first STOMP frames and may call `swap_roles()`.

Connection ids: `connection_id()` = sha1 over "ip|port|ip|port|first_ts_ns|seq|ordinal" with
the two endpoints in canonical order (as `canonical_key`), hex, first 16 characters; `seq` is the
sequence number of the packet that opened the connection (the ISN of a SYN or SYN-ACK) and
`ordinal` counts the connections the tracker opened before on this 4-tuple (0 for the first),
so two connections of one 4-tuple never share an id, even when they start in the same
nanosecond.  It does not depend on roles, so a swap keeps it, and it is the same whichever file
a packet came from and on every re-run of the same input.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from pipeline.compiled import set_slot_values, slot_values
from pipeline.ingest.records import TcpPacket
from pipeline.net import ACK, FIN, RST, SYN, Endpoint, FlowEnds, flow_ends
from pipeline.reassembly.stream import StreamEvent, StreamReassembler

FAR_AWAY = 1 << 24  # sequence distance taken as "another connection" after a close
REUSE_AFTER_IDLE_NS = 120 * 10**9  # a repeated SYN after this much silence is a new connection


def canonical_key(packet: TcpPacket) -> FlowEnds:
    """The 4-tuple with the smaller (ip, port) endpoint first: the grouping key."""
    return flow_ends(packet.src_ip, packet.src_port, packet.dst_ip, packet.dst_port)


def connection_id(
    ip_a: str,
    port_a: int,
    ip_b: str,
    port_b: int,
    first_ts_ns: int,
    opening_seq: int = 0,
    ordinal: int = 0,
) -> str:
    a, b = (ip_a, port_a), (ip_b, port_b)
    if b < a:
        a, b = b, a
    text = f"{a[0]}|{a[1]}|{b[0]}|{b[1]}|{first_ts_ns}|{opening_seq}|{ordinal}"
    return hashlib.sha1(text.encode()).hexdigest()[:16]


class Connection:
    """One TCP connection of a 4-tuple: its ends, how their roles were told, its times, and how
    each direction ended."""

    __slots__ = (
        "connection_id",
        "client_ip",
        "client_port",
        "server_ip",
        "server_port",
        "role_source",
        "first_ts_ns",
        "last_ts_ns",
        "client_isn",
        "server_isn",
        "client_end",
        "server_end",
        "client_packets",
        "server_packets",
    )

    def __init__(
        self,
        connection_id: str,
        client_ip: str,
        client_port: int,
        server_ip: str,
        server_port: int,
        role_source: str,  # "syn" | "syn_ack" | "broker_port" | "unknown"
        first_ts_ns: int,
        last_ts_ns: int,
        client_isn: int | None = None,
        server_isn: int | None = None,
    ) -> None:
        self.connection_id = connection_id
        self.client_ip = client_ip
        self.client_port = client_port
        self.server_ip = server_ip
        self.server_port = server_port
        self.role_source = role_source
        self.first_ts_ns = first_ts_ns
        self.last_ts_ns = last_ts_ns
        self.client_isn = client_isn
        self.server_isn = server_isn
        self.client_end = "none"  # how the client's direction ended: "fin" | "rst" | "none"
        self.server_end = "none"
        self.client_packets = 0
        self.server_packets = 0

    def fields(self) -> tuple[object, ...]:
        """What the connection is: compared and shown."""
        return tuple(getattr(self, name) for name in Connection.__slots__)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.fields() == other.fields()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        fields = zip(Connection.__slots__, self.fields(), strict=True)
        pairs = ", ".join(f"{name}={value!r}" for name, value in fields)
        return f"Connection({pairs})"

    def __getstate__(self) -> tuple[None, dict[str, object]]:
        return slot_values(self)

    def __setstate__(self, state: tuple[None, dict[str, object]]) -> None:
        set_slot_values(self, state)

    @property
    def client(self) -> Endpoint:
        return Endpoint(self.client_ip, self.client_port)

    @property
    def server(self) -> Endpoint:
        return Endpoint(self.server_ip, self.server_port)

    @property
    def closed(self) -> bool:
        ends = (self.client_end, self.server_end)
        return "rst" in ends or ends == ("fin", "fin")

    @property
    def ending(self) -> bool:
        """A FIN or RST was seen in either direction: no SYN of this connection can follow."""
        return self.client_end != "none" or self.server_end != "none"

    def swap_roles(self) -> None:
        self.client_ip, self.server_ip = self.server_ip, self.client_ip
        self.client_port, self.server_port = self.server_port, self.client_port
        self.client_isn, self.server_isn = self.server_isn, self.client_isn
        self.client_end, self.server_end = self.server_end, self.client_end
        self.client_packets, self.server_packets = self.server_packets, self.client_packets


@dataclass(slots=True, frozen=True)
class Opened:
    connection: Connection


@dataclass(slots=True, frozen=True)
class Segment:
    """A reassembly event of one direction (Data, Gap or Conflict)."""

    connection_id: str
    from_client: bool
    event: StreamEvent


@dataclass(slots=True, frozen=True)
class Closed:
    """The connection is over (superseded by a new one, or flush); no more events for it."""

    connection: Connection


ConnectionEvent = Opened | Segment | Closed


class ConnectionTracker:
    """Splits one 4-tuple's packets into connections and reassembles both directions."""

    __slots__ = (
        "broker_ports",
        "max_pending_bytes",
        "history_bytes",
        "reuse_after_idle_ns",
        "connection",
        "connections_opened",
        "foreign_packets",
        "_streams",
    )

    def __init__(
        self,
        *,
        broker_ports: Iterable[int] = (),
        max_pending_bytes: int = 8 * 1024 * 1024,
        history_bytes: int = 64 * 1024,
        reuse_after_idle_ns: int = REUSE_AFTER_IDLE_NS,
    ) -> None:
        self.broker_ports = frozenset(broker_ports)
        self.max_pending_bytes = max_pending_bytes
        self.history_bytes = history_bytes
        self.reuse_after_idle_ns = reuse_after_idle_ns
        self.connection: Connection | None = None
        self.connections_opened = 0  # the next connection's ordinal (see connection_id)
        self.foreign_packets = 0  # packets not of this tracker's 4-tuple (ignored)
        # by Endpoint; looked up by its (ip, port) tuple too, which it equals
        self._streams: dict[tuple[str, int], StreamReassembler] = {}

    def __getstate__(self) -> tuple[None, dict[str, object]]:
        return slot_values(self)

    def __setstate__(self, state: object) -> None:
        # Trackers pickled (carried) before a slot existed get its default.
        self.reuse_after_idle_ns = REUSE_AFTER_IDLE_NS
        self.connections_opened = 0
        dict_state, slot_state = state if isinstance(state, tuple) else (state, None)
        for part in (dict_state, slot_state):
            for name, value in (part or {}).items():
                setattr(self, name, value)

    def add(self, packet: TcpPacket, payload: bytes) -> list[ConnectionEvent]:
        """Take the next packet of the 4-tuple (capture-time order) with its captured payload."""
        events: list[ConnectionEvent] = []
        conn = self.connection
        sender = Endpoint(packet.src_ip, packet.src_port)
        if conn is not None and sender != conn.client and sender != conn.server:
            self.foreign_packets += 1
            return events
        if conn is None or self._starts_new(conn, packet, sender):
            if conn is not None:
                self._close(events)
            conn = self._open(packet)
            events.append(Opened(conn))
        from_client = sender == conn.client
        self._track(conn, packet, from_client)
        stream = self._streams.get(sender)
        if stream is None:
            isn = conn.client_isn if from_client else conn.server_isn
            stream = self._streams[sender] = StreamReassembler(
                isn, max_pending_bytes=self.max_pending_bytes, history_bytes=self.history_bytes
            )
        conn_id = conn.connection_id
        for event in stream.add(
            packet.seq, payload, packet.ts_ns, flags=packet.flags, wire_len=packet.wire_len
        ):
            events.append(Segment(conn_id, from_client, event))
        return events

    def add_bare_ack(self, src_ip: str, src_port: int, ts_ns: int, count: int = 1) -> bool:
        """``add`` for a packet without payload, SYN, FIN or RST (most ACKs), without building
        it, or for ``count`` of them from one sender, the last at ``ts_ns``: True when taken
        (they make no events); False when they need ``add``."""
        known = self._known_sender(src_ip, src_port)
        if known is None:
            return False
        conn, stream, from_client = known
        _count(conn, from_client, ts_ns, count)
        stream.touch(ts_ns)
        return True

    def takes_bare_ack(self, src_ip: str, src_port: int) -> bool:
        """Whether `add_bare_ack` would take this sender's bare ACKs now."""
        return self._known_sender(src_ip, src_port) is not None

    def in_order_position(self, src_ip: str, src_port: int) -> tuple[int, int] | None:
        """`StreamReassembler.in_order_position` of this sender's direction, when `add_run`
        could take its packets; else None."""
        known = self._known_sender(src_ip, src_port)
        if known is None:
            return None
        conn, stream, _ = known
        if conn.closed:
            return None
        return stream.in_order_position()

    def add_run(
        self, src_ip: str, src_port: int, data: bytes, sizes: list[int], ts_ns: int, last_ns: int
    ) -> tuple[bool, int]:
        """``add`` of data packets of one sender, each of which `continues` the one before
        from `in_order_position`, the last captured at ``ts_ns``; ``last_ns``: the capture time
        of the latest packet of the connection (a bare ACK taken since may be later). (From the
        client, the stream offset of the first byte)."""
        known = self._known_sender(src_ip, src_port)
        assert known is not None
        conn, stream, from_client = known
        offset = stream.add_run(data, sizes, ts_ns)
        conn.last_ts_ns = last_ns
        if from_client:
            conn.client_packets += len(sizes)
        else:
            conn.server_packets += len(sizes)
        return from_client, offset

    def _known_sender(
        self, src_ip: str, src_port: int
    ) -> tuple[Connection, StreamReassembler, bool] | None:
        """The current connection, the stream of a sender it has seen send, and whether that
        sender is its client; None for anything else."""
        conn = self.connection
        if conn is None:
            return None
        stream = self._streams.get((src_ip, src_port))  # equal to the Endpoint, made faster
        if stream is None:
            return None
        # per packet: the fields, not Endpoints built from them
        if src_port == conn.client_port and src_ip == conn.client_ip:
            return conn, stream, True
        if src_port == conn.server_port and src_ip == conn.server_ip:
            return conn, stream, False
        return None

    def flush(self) -> list[ConnectionEvent]:
        """End of input for this 4-tuple: deliver what is left and close the connection."""
        events: list[ConnectionEvent] = []
        if self.connection is not None:
            self._close(events)
        return events

    def swap_roles(self) -> None:
        """Exchange client and server of the current connection (for later events)."""
        if self.connection is not None:
            self.connection.swap_roles()

    @property
    def saw_payload(self) -> bool:
        """Whether the current connection has carried any payload (captured or cut) so far."""
        return any(s.offset > 0 or s.pending_bytes for s in self._streams.values())

    def stream(self, from_client: bool) -> StreamReassembler | None:
        """The reassembler of one direction of the current connection, if it has started."""
        conn = self.connection
        if conn is None:
            return None
        return self._streams.get(conn.client if from_client else conn.server)

    def _starts_new(self, conn: Connection, packet: TcpPacket, sender: Endpoint) -> bool:
        flags = packet.flags
        if flags & SYN and not flags & ACK:
            if sender != conn.client or conn.client_isn != packet.seq:
                return True
            return self._over(conn, packet.ts_ns)  # else a retransmitted SYN
        if flags & SYN:  # SYN-ACK
            if conn.server_isn is not None:
                if sender != conn.server or conn.server_isn != packet.seq:
                    return True
                return self._over(conn, packet.ts_ns)
            expected_client_isn = (packet.ack - 1) & 0xFFFFFFFF
            return self._over(conn, packet.ts_ns) or (
                conn.client_isn is not None
                and (sender != conn.server or conn.client_isn != expected_client_isn)
            )
        if conn.closed and packet.payload_len and not flags & RST:
            stream = self._streams.get(sender)
            if stream is not None and stream.next_seq is not None:
                distance = (packet.seq - stream.next_seq) & 0xFFFFFFFF
                return min(distance, (1 << 32) - distance) > FAR_AWAY
        return False

    def _over(self, conn: Connection, ts_ns: int) -> bool:
        """Whether a repeated handshake packet must belong to a new connection (port reuse)."""
        return conn.ending or ts_ns - conn.last_ts_ns > self.reuse_after_idle_ns

    def _open(self, packet: TcpPacket) -> Connection:
        src, dst = (packet.src_ip, packet.src_port), (packet.dst_ip, packet.dst_port)
        flags = packet.flags
        client_isn = server_isn = None
        if flags & SYN and not flags & ACK:
            client, server, source, client_isn = src, dst, "syn", packet.seq
        elif flags & SYN:
            client, server, source = dst, src, "syn_ack"
            server_isn, client_isn = packet.seq, (packet.ack - 1) & 0xFFFFFFFF
        elif dst[1] in self.broker_ports and src[1] not in self.broker_ports:
            client, server, source = src, dst, "broker_port"
        elif src[1] in self.broker_ports and dst[1] not in self.broker_ports:
            client, server, source = dst, src, "broker_port"
        else:
            client, server, source = src, dst, "unknown"
        conn_id = connection_id(
            src[0], src[1], dst[0], dst[1], packet.ts_ns, packet.seq, self.connections_opened
        )
        self.connections_opened += 1
        conn = Connection(
            conn_id,
            client[0],
            client[1],
            server[0],
            server[1],
            source,
            packet.ts_ns,
            packet.ts_ns,
            client_isn,
            server_isn,
        )
        self.connection = conn
        self._streams = {}
        return conn

    def _track(self, conn: Connection, packet: TcpPacket, is_client: bool) -> None:
        conn.last_ts_ns = packet.ts_ns
        if is_client:
            conn.client_packets += 1
        else:
            conn.server_packets += 1
        flags = packet.flags
        if flags & SYN and flags & ACK and not is_client and conn.server_isn is None:
            conn.server_isn = packet.seq
        if flags & RST:
            end = "rst"
        elif flags & FIN:
            end = "fin"
        else:
            return
        if is_client and conn.client_end != "rst":
            conn.client_end = end
        elif not is_client and conn.server_end != "rst":
            conn.server_end = end

    def _close(self, events: list[ConnectionEvent]) -> None:
        conn = self.connection
        assert conn is not None
        for sender, stream in self._streams.items():
            from_client = sender == conn.client
            for event in stream.flush():
                events.append(Segment(conn.connection_id, from_client, event))
        events.append(Closed(conn))
        self.connection = None
        self._streams = {}


def _count(conn: Connection, from_client: bool, ts_ns: int, count: int = 1) -> None:
    """``count`` packets of ``conn`` taken on a fast path (no flags to track), the last at
    ``ts_ns``."""
    conn.last_ts_ns = ts_ns
    if from_client:
        conn.client_packets += count
    else:
        conn.server_packets += count
