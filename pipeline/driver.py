"""The connection driver: one 4-tuple's packets and payloads in, table rows out. Sans-IO.

It is the glue between connection tracking and reassembly (`pipeline.reassembly`) and the STOMP
session model (`pipeline.session`): each connection the tracker opens gets a model, the
reassembled bytes, gaps and conflicts of each direction are fed to it, and closes finish it.
Two decisions live here:

* Roles. When the handshake was not captured and no broker port tells, the sender of the first
  packet is taken as the client; if its first bytes are a server's frame (CONNECTED, MESSAGE,
  RECEIPT, ERROR), the roles are swapped before the model sees them.
* Strays. A connection whose start was not captured and that carried no payload (most often the
  last ACKs or FIN of one that ended in an earlier batch) is not a session: it becomes one
  anomaly row.
* Transport. A connection whose client opens with a TLS handshake has its records decrypted by
  `pipeline.tls` (with the secrets of the run's key logs); one whose client opens with an HTTP
  upgrade to WebSocket, directly or inside TLS, has its bytes de-framed by `pipeline.websocket`
  before the model sees the STOMP inside; plain TCP goes to the model directly.

At the end of a batch's input, a connection that is over is finished; one still open is either
closed (``close_open``: end reason ``capture_end``) or handed back as a `DriverState` for the
caller to carry into the next batch. No Spark, no files, no pickling: the caller reads the
payloads and stores the state.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.compiled import set_slot_values, slot_values
from pipeline.ingest.records import TcpPacket
from pipeline.net import DEFAULT_BROKER_PORTS, FIN, RST, Direction
from pipeline.reassembly import Closed, Conflict, Data, Gap, Opened, Segment
from pipeline.reassembly.connections import Connection, ConnectionTracker
from pipeline.session import Endpoint, ModelOptions, SessionModel
from pipeline.session.frame_rows import TableRows
from pipeline.session.rows import anomaly_row
from pipeline.session.streams import make_chunk
from pipeline.tls.transport import TlsTransport, looks_like_tls, starts_tls
from pipeline.websocket import Transport
from pipeline.websocket import apply as apply_transport
from pipeline.websocket.handshake import MAX_HEAD
from pipeline.websocket.transport import TCP

SERVER_COMMANDS = (b"CONNECTED", b"MESSAGE", b"RECEIPT", b"ERROR")

Source = tuple[str, int]  # (capture file, record offset) of a packet


@dataclass(frozen=True, slots=True)
class DriverConfig:
    options: ModelOptions = field(default_factory=ModelOptions)
    broker_ports: tuple[int, ...] = DEFAULT_BROKER_PORTS
    close_open: bool = False
    # Bytes a WebSocket upgrade may hold per direction while undecided (request head not
    # ended, or no response), after which the connection is decoded as STOMP over TCP.
    websocket_max_held: int = MAX_HEAD


class DriverState:
    """Everything needed to continue a connection in a later batch."""

    __slots__ = ("tracker", "model", "transport")

    def __init__(
        self,
        tracker: ConnectionTracker,
        model: SessionModel | None,
        # What carries STOMP: plain TCP, WebSocket after an HTTP upgrade (pipeline.websocket),
        # either of them inside TLS (pipeline.tls).
        transport: Transport | TlsTransport | None = None,
    ) -> None:
        self.tracker = tracker
        self.model = model
        self.transport = transport

    def __getstate__(self) -> tuple[None, dict[str, object]]:
        return slot_values(self)

    def __setstate__(self, state: tuple[None, dict[str, object]]) -> None:
        set_slot_values(self, state)


class ConnectionDriver:
    """Feed one 4-tuple's packets in capture-time order; `end()` at the end of the input."""

    __slots__ = ("config", "_state", "_first_source", "_out", "_ended")

    def __init__(self, config: DriverConfig, state: DriverState | None = None) -> None:
        self.config = config
        self._state = state
        self._first_source: Source | None = None  # of the first packet of this input
        self._out: dict[str, TableRows] = {}
        self._ended: list[SessionModel] = []  # let go with rows left for later drains

    # -- input -------------------------------------------------------------------------------
    def bare_ack(self, src_ip: str, src_port: int, ts_ns: int, count: int = 1) -> bool:
        """A packet with no payload and no SYN/FIN/RST (or ``count`` of them, the last at
        ``ts_ns``), taken without building it when the tracker can (True, as `takes_bare_ack`
        says); else the caller feeds it with `packet`."""
        state = self._state
        return state is not None and state.tracker.add_bare_ack(src_ip, src_port, ts_ns, count)

    def takes_bare_ack(self, src_ip: str, src_port: int) -> bool:
        """Whether `bare_ack` would take this sender's bare ACKs now."""
        state = self._state
        return state is not None and state.tracker.takes_bare_ack(src_ip, src_port)

    def in_order_position(self, src_ip: str, src_port: int) -> tuple[int, int] | None:
        """Where this sender's next data packet must start to be passed on with `data_run`, and
        the highest byte it sent + 1 (both unwrapped sequence numbers: see
        `pipeline.reassembly.stream.continues`); None when its packets go to `packet`."""
        fast = self._fast_path()
        return None if fast is None else fast[0].in_order_position(src_ip, src_port)

    def data_run(
        self,
        src_ip: str,
        src_port: int,
        data: bytes,
        sizes: list[int],
        timestamps: list[int],
        sources: list[Source],
        last_ns: int,
    ) -> None:
        """`packet` of consecutive data packets of one sender (all captured, no SYN, FIN or
        RST), each of which continues the one before from `in_order_position`, with only bare
        ACKs of the other sender taken in between: the tracker and the model take them as one
        run: their payloads joined in ``data``, of ``sizes``. ``last_ns``: the capture time of
        the latest of them all."""
        fast = self._fast_path()
        assert fast is not None  # as `in_order_position` found it
        tracker, model, tls = fast
        last = timestamps[-1]
        from_client, offset = tracker.add_run(src_ip, src_port, data, sizes, last, last_ns)
        direction = Direction.of(from_client)
        if tls is None:
            model.on_data_run(direction, offset, data, sizes, timestamps, sources)
        else:
            tls.receive_run(model, direction, offset, data, sizes, timestamps, sources)

    def _fast_path(self) -> tuple[ConnectionTracker, SessionModel, TlsTransport | None] | None:
        """The tracker, the model and the TLS transport if any, when the model has started and
        the connection carries STOMP over plain TCP, or over TLS past its handshake (the fast
        paths' condition)."""
        state = self._state
        if state is None or state.model is None:
            return None
        transport = state.transport
        if transport is None or transport.state == TCP:
            return state.tracker, state.model, None
        if type(transport) is TlsTransport and transport.runs:
            return state.tracker, state.model, transport
        return None

    def packet(self, packet: TcpPacket, payload: bytes, source: Source) -> None:
        if self._first_source is None:
            self._first_source = source
        state = self._state
        if state is None:
            tracker = ConnectionTracker(broker_ports=self.config.broker_ports)
            state = self._state = DriverState(tracker, None)
        swapped = False
        # Segments before an Opened event belong to the connection this packet superseded.
        conn = state.tracker.connection
        for event in state.tracker.add(packet, payload):
            if type(event) is Opened:
                conn = event.connection
            elif type(event) is Segment:
                if state.model is None:
                    assert conn is not None
                    swapped = self._start_model(state, event, conn)
                if swapped:  # events of this packet were made before the roles were swapped
                    event = Segment(event.connection_id, not event.from_client, event.event)
            self._on_event(state, event, source, conn)
        model = state.model
        if model is None:
            return
        conn = state.tracker.connection
        if conn is not None and packet.flags & (FIN | RST):
            sender = (packet.src_ip, packet.src_port)
            direction = Direction.of(sender == conn.client)
            transport = state.transport
            if transport is not None and transport.state != TCP:
                apply_transport(model, transport.receive_eof(direction, packet.ts_ns), source)
            model.on_close(direction, packet.ts_ns, "rst" if packet.flags & RST else "fin")

    def end(self) -> DriverState | None:
        """The input of this batch is over: finish what is over (or everything, with
        ``close_open``); return the state to carry when the connection is still open."""
        state = self._state
        self._state = None
        if state is None:
            return None
        if state.model is not None:
            self._collect(state.model)
        conn = state.tracker.connection
        if conn is None:
            return None
        if state.model is None and not state.tracker.saw_payload and self._stray(conn):
            return None
        if not (conn.closed or self.config.close_open):
            return state
        for event in state.tracker.flush():  # the tracker lets go of conn: pass it along
            if type(event) is Closed:
                model = state.model or self._model_for(event.connection)
                self._finish_transport(state, model, event.connection.last_ts_ns)
                model.finish(event.connection.last_ts_ns, None if conn.closed else "capture_end")
                self._collect(model)
                state.model = None
            else:
                self._on_event(state, event, None, conn)
        return None

    # -- output ------------------------------------------------------------------------------
    @property
    def open_session_id(self) -> str | None:
        """The session of the connection in progress, if its model has started."""
        state = self._state
        return None if state is None or state.model is None else state.model.session_id

    def drain(self, unsettled_limit: int = -1) -> dict[str, TableRows]:
        """Table rows made since the last drain, by table. (The current model's rows are
        collected here, not after each packet; a model is collected before it is let go.)
        ``unsettled_limit``: of the rows of MESSAGEs an ended connection left unsettled, about
        this many a drain (every one when negative, `SessionModel.drain`); `rows_left` says
        whether some are still to come."""
        state = self._state
        if state is not None and state.model is not None:
            self._collect(state.model)
        ended = self._ended
        while ended:
            model = ended[0]
            for table, rows in model.drain(unsettled_limit).items():
                self._emit(table, rows)
            if model.rows_left:
                break
            del ended[0]
        out, self._out = self._out, {}
        return out

    @property
    def rows_left(self) -> bool:
        return bool(self._ended)

    def _emit(self, table: str, rows: TableRows) -> None:
        """``rows`` are taken over: a drain hands over containers it no longer holds."""
        if rows:
            held = self._out.get(table)
            if held is None:
                self._out[table] = rows
            else:
                held.extend(rows)

    def _collect(self, model: SessionModel) -> None:
        """The model's rows, but for those of the MESSAGEs an ended connection left unsettled:
        they wait in the model for `drain` to take a part of them at a time."""
        for table, rows in model.drain(0).items():
            self._emit(table, rows)
        if model.rows_left and model not in self._ended:
            self._ended.append(model)

    # -- one connection ----------------------------------------------------------------------
    def _on_event(
        self,
        state: DriverState,
        event: object,
        source: Source | None,
        conn: Connection | None,
    ) -> None:
        """``conn``: the connection a Segment belongs to (the tracker may have moved on to the
        next one, or, at the end of the input, let go of it). The rows a Segment makes are
        collected by the caller, once per packet; a model is collected before it is let go."""
        if type(event) is Segment:
            if state.model is None:
                assert conn is not None
                self._start_model(state, event, conn)
            model = state.model
            assert model is not None
            direction = Direction.of(event.from_client)
            inner = event.event
            transport = state.transport
            if transport is not None and transport.state != TCP:  # WebSocket, or undecided
                if type(inner) is Data:
                    events = transport.receive(direction, inner.ts_ns, inner.offset, inner.data)
                    apply_transport(model, events, source)
                elif type(inner) is Gap:
                    events = transport.receive_gap(direction, inner.ts_ns, inner.offset, inner.size)
                    apply_transport(model, events, source)
                elif type(inner) is Conflict:
                    model.on_conflict(direction, inner.ts_ns, inner.offset, inner.size, source)
            elif type(inner) is Data:
                model.on_data(direction, inner.ts_ns, inner.offset, inner.data, source)
            elif type(inner) is Gap:
                model.on_gap(direction, inner.ts_ns, inner.offset, inner.size, source)
            elif type(inner) is Conflict:
                model.on_conflict(direction, inner.ts_ns, inner.offset, inner.size, source)
        elif type(event) is Opened:
            if state.model is not None:
                self._collect(state.model)
            state.model = None
        elif type(event) is Closed:
            if state.model is None and self._stray(event.connection):
                return
            model = state.model or self._model_for(event.connection)
            self._finish_transport(state, model, event.connection.last_ts_ns)
            model.finish(event.connection.last_ts_ns)
            self._collect(model)
            state.model = None

    def _start_model(self, state: DriverState, first: Segment, conn: Connection) -> bool:
        """Create the connection's model; True when the first bytes showed the roles were wrong."""
        swap = (
            conn.role_source == "unknown" and first.from_client and _looks_like_server(first.event)
        )
        if swap:
            conn.swap_roles()
        state.model = self._model_for(conn)
        mid_stream = conn.role_source not in ("syn", "syn_ack")
        transport = Transport(mid_stream=mid_stream, max_held=self.config.websocket_max_held)
        if _opens_tls(first, mid_stream):
            tls = TlsTransport(inner=transport)
            state.model.map_tcp_offsets(tls.tcp_offsets)
            state.transport = tls
        else:
            state.transport = transport
        return swap

    @staticmethod
    def _finish_transport(state: DriverState, model: SessionModel, ts_ns: int) -> None:
        """Bytes a WebSocket transport still holds (an undecided opening, an upgrade without
        its response) are settled before the model finishes."""
        transport, state.transport = state.transport, None
        if transport is not None and transport.state != TCP:
            apply_transport(model, transport.finish(ts_ns))
        if isinstance(transport, TlsTransport):
            model.on_tls(transport.facts)

    def _stray(self, conn: Connection) -> bool:
        """True (and an anomaly row) when ``conn`` is a stray, not a session: see the module
        docstring. Nothing of a stray is carried."""
        if conn.role_source in ("syn", "syn_ack"):
            return False
        packets = conn.client_packets + conn.server_packets
        detail = (
            f"{packets} packets without payload between {conn.client_ip}:{conn.client_port} and "
            f"{conn.server_ip}:{conn.server_port}, connection start not captured: no session"
        )
        at = make_chunk(0, 0, conn.first_ts_ns, self._first_source)
        self._emit("anomalies", [anomaly_row("tcp", "stray_packets", None, None, at, None, detail)])
        return True

    def _model_for(self, conn: Connection) -> SessionModel:
        return SessionModel(
            conn.connection_id,
            Endpoint(conn.client_ip, conn.client_port),
            Endpoint(conn.server_ip, conn.server_port),
            self.config.options,
            mid_stream=conn.role_source not in ("syn", "syn_ack"),
        )


def _opens_tls(first: Segment, mid_stream: bool) -> bool:
    """Whether a connection's first bytes are TLS: the client's handshake record at the start of
    its stream, or, in a capture that starts mid-connection, a TLS record."""
    data = first.event
    if type(data) is not Data:
        return False
    if mid_stream:
        return looks_like_tls(data.data)
    return first.from_client and data.offset == 0 and starts_tls(data.data)


def _looks_like_server(event: object) -> bool:
    return type(event) is Data and event.data.lstrip(b"\r\n").startswith(SERVER_COMMANDS)
