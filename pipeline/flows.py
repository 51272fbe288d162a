"""Drives each TCP flow's packets through connection tracking, reassembly and the session model.

Pure Python, no Spark: the Spark job feeds it one partition's rows sorted by (flow_key, ts_ns),
with the saved state of a flow (if any) ahead of its packets. Payloads are read back from the
capture files by offset. At the end of a flow's rows, a connection that is over is finished; one
still open is either carried (pickled into a state row for the next run) or, when the run is told
to close open connections, finished with end reason `capture_end`.
"""

from __future__ import annotations

import mmap
import pickle
from collections.abc import Iterator
from dataclasses import dataclass, field

from pipeline.ingest.records import FIN, RST, SYN, TcpPacket
from pipeline.reassembly import Closed, Conflict, Data, Gap, Opened, Segment
from pipeline.reassembly.connections import Connection, ConnectionTracker
from pipeline.session import Endpoint, ModelOptions, SessionModel
from pipeline.session.rows import anomaly_row
from pipeline.session.streams import make_chunk

SERVER_COMMANDS = (b"CONNECTED", b"MESSAGE", b"RECEIPT", b"ERROR")
STATE_VERSION = 1
# the columns of a packets-frame row that the runner reads, in `FlowRunner._row`'s order
ROW_FIELDS = (
    "flow_key",
    "record_type",
    "state",
    "file_id",
    "ts_ns",
    "src_ip",
    "src_port",
    "dst_ip",
    "dst_port",
    "seq",
    "ack",
    "flags",
    "window",
    "payload_offset",
    "payload_len",
    "wire_len",
    "record_offset",
)


@dataclass(frozen=True, slots=True)
class RunnerConfig:
    paths: tuple[str, ...]  # capture files of this run, indexed by file_id
    options: ModelOptions = field(default_factory=ModelOptions)
    broker_ports: tuple[int, ...] = (61613, 61614)
    close_open: bool = False


@dataclass(slots=True)
class FlowState:
    """Everything needed to continue a flow in a later run."""

    tracker: ConnectionTracker
    model: SessionModel | None
    version: int = STATE_VERSION


class PayloadFiles:
    """Capture files mapped once per task; payloads are slices of the maps."""

    def __init__(self, paths: tuple[str, ...]) -> None:
        self.paths = paths
        self._maps: dict[int, mmap.mmap | bytes] = {}

    def read(self, file_id: int, offset: int, length: int) -> bytes:
        buf = self._maps.get(file_id)
        if buf is None:
            with open(self.paths[file_id], "rb") as handle:
                try:
                    buf = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
                except ValueError:  # empty file
                    buf = b""
            self._maps[file_id] = buf
        return buf[offset : offset + length]

    def close(self) -> None:
        for buf in self._maps.values():
            if isinstance(buf, mmap.mmap):
                buf.close()
        self._maps.clear()


class FlowRunner:
    """Feed rows (packets and state) sorted by flow; drain tagged table rows."""

    def __init__(self, config: RunnerConfig) -> None:
        self.config = config
        self.files = PayloadFiles(config.paths)
        self._flow_key: str | None = None
        self._flow_source: tuple[str, int] | None = None  # (file, offset) of its first packet
        self._state: FlowState | None = None
        self._out: dict[str, list[dict]] = {}
        self._out_keys: dict[str, list[str | None]] = {}
        self._pending = 0

    # -- input -------------------------------------------------------------------------------
    def feed(self, row: dict) -> None:
        """One row of the packets frame (or a carried state row), as a dict."""
        self._row(*(row.get(name) for name in ROW_FIELDS))

    def feed_columns(self, columns: dict[str, list]) -> None:
        """Rows given as columns (e.g. ``RecordBatch.to_pydict()``); missing columns are null."""
        count = len(columns["flow_key"])
        nulls = [None] * count
        row = self._row
        for values in zip(*(columns.get(name, nulls) for name in ROW_FIELDS), strict=True):
            row(*values)

    def _row(
        self,
        key: str,
        record_type: str | None,
        state: bytes | None,
        file_id: int,
        ts_ns: int,
        src_ip: str,
        src_port: int,
        dst_ip: str,
        dst_port: int,
        seq: int,
        ack: int,
        flags: int,
        window: int,
        payload_offset: int,
        payload_len: int,
        wire_len: int,
        record_offset: int,
    ) -> None:
        if key != self._flow_key:
            self._end_flow()
            self._flow_key = key
            self._flow_source = None
        if record_type == "state":
            self._state = _load_state(state)  # type: ignore[arg-type]
            return
        flow = self._state
        if (
            flow is not None
            and not payload_len
            and not wire_len
            and not flags & (SYN | FIN | RST)
            and flow.tracker.add_bare_ack(src_ip, src_port, ts_ns)
        ):
            return
        packet = TcpPacket(
            ts_ns,
            src_ip,
            src_port,
            dst_ip,
            dst_port,
            seq,
            ack,
            flags,
            window,
            payload_offset,
            payload_len,
            wire_len,
            record_offset,
        )
        payload = self.files.read(file_id, payload_offset, payload_len) if payload_len else b""
        source = (self.config.paths[file_id], record_offset)
        if self._flow_source is None:
            self._flow_source = source
        self._packet(packet, payload, source)

    def close(self) -> None:
        self._end_flow()
        self.files.close()

    # -- output ------------------------------------------------------------------------------
    def pending_rows(self) -> int:
        return self._pending

    def drain(self) -> Iterator[tuple[str, list[dict], list[str | None]]]:
        out, keys = self._out, self._out_keys
        self._out, self._out_keys, self._pending = {}, {}, 0
        for kind, rows in out.items():
            yield kind, rows, keys[kind]

    def _emit(self, kind: str, rows: list[dict]) -> None:
        if not rows:
            return
        self._out.setdefault(kind, []).extend(rows)
        self._out_keys.setdefault(kind, []).extend([self._flow_key] * len(rows))
        self._pending += len(rows)

    def _collect(self, model: SessionModel) -> None:
        for table, rows in model.drain().items():
            if rows:
                self._emit(table, rows)

    # -- one flow ----------------------------------------------------------------------------
    def _packet(self, packet: TcpPacket, payload: bytes, source: tuple[str, int]) -> None:
        state = self._state
        if state is None:
            tracker = ConnectionTracker(broker_ports=self.config.broker_ports)
            state = self._state = FlowState(tracker, None)
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
            direction = "c2s" if sender == conn.client else "s2c"
            model.on_close(direction, packet.ts_ns, "rst" if packet.flags & RST else "fin")
        self._collect(model)

    def _on_event(
        self,
        state: FlowState,
        event: object,
        source: tuple[str, int] | None,
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
            direction = "c2s" if event.from_client else "s2c"
            inner = event.event
            if type(inner) is Data:
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
            model.finish(event.connection.last_ts_ns)
            self._collect(model)
            state.model = None

    def _start_model(self, state: FlowState, first: Segment, conn: Connection) -> bool:
        """Create the connection's model; True when the first bytes showed the roles were wrong."""
        swap = (
            conn.role_source == "unknown" and first.from_client and _looks_like_server(first.event)
        )
        if swap:
            conn.swap_roles()
        state.model = self._model_for(conn)
        return swap

    def _stray(self, conn: Connection) -> bool:
        """A connection whose start was not captured and that carried no payload (most often the
        last ACKs or FIN of one that ended in an earlier batch) is not a session: it becomes an
        anomaly row (True), and nothing is carried."""
        if conn.role_source in ("syn", "syn_ack"):
            return False
        packets = conn.client_packets + conn.server_packets
        detail = (
            f"{packets} packets without payload between {conn.client_ip}:{conn.client_port} and "
            f"{conn.server_ip}:{conn.server_port}, connection start not captured: no session"
        )
        at = make_chunk(0, 0, conn.first_ts_ns, self._flow_source)
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

    def _end_flow(self) -> None:
        state, key = self._state, self._flow_key
        self._state = None
        if state is None:
            return
        conn = state.tracker.connection
        if conn is None:
            return
        if state.model is None and not state.tracker.saw_payload and self._stray(conn):
            return
        if conn.closed or self.config.close_open:
            for event in state.tracker.flush():  # the tracker lets go of conn: pass it along
                if type(event) is Closed:
                    model = state.model or self._model_for(event.connection)
                    model.finish(
                        event.connection.last_ts_ns, None if conn.closed else "capture_end"
                    )
                    self._collect(model)
                    state.model = None
                else:
                    self._on_event(state, event, None, conn)
            return
        session_id = None if state.model is None else state.model.session_id
        self._out.setdefault("_state", []).append(
            {"state": pickle.dumps(state, protocol=5), "session_id": session_id}
        )
        self._out_keys.setdefault("_state", []).append(key)
        self._pending += 1


def _looks_like_server(event: object) -> bool:
    return type(event) is Data and event.data.lstrip(b"\r\n").startswith(SERVER_COMMANDS)


def _load_state(blob: bytes) -> FlowState:
    state = pickle.loads(blob)
    if not isinstance(state, FlowState) or state.version != STATE_VERSION:
        raise ValueError("carried connection state from an incompatible version of stomp-lake")
    return state
