"""The STOMP session model: one connection's bytes (both directions, in capture-time order) in,
table rows out. Sans-IO: the caller feeds chunks, gaps and closes, and drains rows.

Choices worth knowing when reading the tables:

* Both directions start with 1.0 decoding rules; after CONNECTED both decoders switch to the
  negotiated version (``version`` header, 1.0 when absent) for frames not yet started.
* ``frame_index`` numbers the frames of both directions in the order they completed.
* A frame's ``ts`` is the capture time of the chunk holding its first byte, ``ts_end`` that of
  the chunk holding its NUL. EOLs directly following a NUL belong to the frame (the grammar's
  ``NULL *( EOL )``), in whatever segment they arrive, unless the direction has heart-beating
  negotiated and the EOL came in a later chunk at least half the negotiated interval after the
  byte before it (``DirectionStream.is_trailing_eol``). Any other EOL is a heart-beat row, its
  ``gap_ms`` measured from the chunk holding the previous byte of that direction.
* Rows are emitted when final: a MESSAGE when settled (ACK/NACK, at once in auto mode, ``none``
  at the end), a SEND or ACK/NACK inside a transaction at COMMIT/ABORT (``unfinished`` at the
  end), an ERROR once the next frame or the close tells whether it closed the connection,
  subscriptions at UNSUBSCRIBE or the end, receipts when answered (``missing`` at the end), and
  the ``sessions`` row at ``finish``.
* Matching is causal, by capture time: an ACK/NACK settles only a MESSAGE whose first byte was
  captured no later than the ACK's first byte, and a RECEIPT (or ERROR with ``receipt-id``)
  answers only a request captured no later than it. Otherwise it is a violation
  (``ack_before_delivery``, ``receipt_before_request``) and the MESSAGE or request keeps waiting
  for a later ACK or answer, so latencies are never negative.
* An ACK/NACK in a transaction takes effect at COMMIT (in the order sent) and never after ABORT;
  ``acked_at`` is still the time of the ACK frame itself.
* MESSAGEs of a subscription whose SUBSCRIBE was not seen are treated as individually
  acknowledged. Past ``max_pending_in_memory`` unsettled MESSAGEs the oldest have their rows
  spilled to disk, a compact record of each left in memory (``spilled``); this changes no row.
  Beyond ``max_pending_messages`` unsettled MESSAGEs, or ``max_pending_bytes`` of memory held
  by them, the oldest is given up as ``none`` (and counted in ``unacked_messages``), with one
  ``pending_overflow`` anomaly; from then on an ACK/NACK naming no unsettled MESSAGE is
  ``ack_unmatched_after_overflow`` (it may name one given up) rather than ``ack_unmatched``.
* A MESSAGE whose ``message-id`` one of the connection's latest 1,024 MESSAGEs had, without
  ``redelivered:true``, is a ``duplicate_message_id`` anomaly (and a row like any other).
* A session starts at its earliest input, whatever the order inputs were handed over in.
* References to things that may precede the capture (unknown subscription, transaction,
  receipt) are anomalies only when the connection start (CONNECT) was seen.
* STOMP over WebSocket (``pipeline.websocket``): the caller feeds the STOMP stream the data
  messages make (``on_data`` with ``tcp_offset``), the upgrade, control frames and WebSocket
  violations; frames rows then carry both offsets, the sessions row the upgrade, and a
  WebSocket close without DISCONNECT ends the session as ``websocket_close``.
* Rows include ``date`` (UTC date of the table's main time); the lake writer adds ``batch_id``.
* Passcodes never reach a row: headers show ``***``; anomaly details, ERROR frames, the
  WebSocket upgrade's fields and close reasons are scrubbed of them (``privacy.scrub``). With
  ``login_hash_key`` the login (and legacy ``username``) is an HMAC-SHA256 everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from pipeline.compiled import set_slot_values, slot_values
from pipeline.session.clock import elapsed_ms
from pipeline.session.frame_rows import TableRows
from pipeline.session.negotiation import decoder_version
from pipeline.session.options import Endpoint, ModelOptions
from pipeline.session.outbox import Outbox
from pipeline.session.privacy import (
    body_fields,
    first_values,
    has_secret_header,
    protect_headers,
    scrub,
    scrub_body,
    scrub_optional,
)
from pipeline.session.protocol import C2S, S2C, SIDE, ProtocolState
from pipeline.session.rows import Row, heartbeat_row, websocket_control_row
from pipeline.session.streams import DirectionStream, Stamp
from pipeline.stomp import ALL_COMMANDS, NEED_DATA, Event, Frame, HeartBeat
from pipeline.stomp import Violation as StompViolation

if TYPE_CHECKING:
    from pipeline.stomp.decoder import _NeedData
    from pipeline.tls.offsets import RecordOffsets
    from pipeline.tls.session import TlsFacts
    from pipeline.websocket.events import Control, HandshakeSeen, Violation

CONNECT_COMMANDS: frozenset[str] = frozenset({"CONNECT", "STOMP"})
TLS_COLUMNS: tuple[str, ...] = (
    "tls_version",
    "tls_cipher_suite",
    "tls_server_name",
    "tls_alpn",
    "tls_decrypted",
    "tls_not_decrypted_reason",
)
WEBSOCKET_COLUMNS: tuple[str, ...] = (
    "ws_path",
    "ws_origin",
    "ws_user_agent",
    "ws_subprotocols_offered",
    "ws_subprotocol",
    "ws_extensions",
    "ws_status",
    "ws_pings",
    "ws_pongs",
    "ws_close_code",
    "ws_close_reason",
    "ws_closed_by",
)


class SessionModel:
    __slots__ = (
        "session_id",
        "client",
        "server",
        "options",
        "_mid_stream",
        "_streams",
        "_out",
        "_protocol",
        "_negotiated",
        "_codec_version",
        "_frame_index",
        "_first",
        "_close",
        "_finished",
        "_websocket",
        "_ws_counts",
        "_ws_close",
        "_tls",
        "_tcp_offsets",
    )

    def __init__(
        self,
        session_id: str,
        client: Endpoint,
        server: Endpoint,
        options: ModelOptions = ModelOptions(),  # noqa: B008 - frozen, safe to share
        *,
        mid_stream: bool = False,
    ) -> None:
        """``mid_stream``: the capture began after the connection did, so both streams may
        start inside a frame (the decoders resync)."""
        self.session_id = session_id
        self.client = client
        self.server = server
        self.options = options
        self._mid_stream = mid_stream
        self._streams: dict[str, DirectionStream] = {
            C2S: DirectionStream(C2S),
            S2C: DirectionStream(S2C),
        }  # by Direction or its plain value
        self._out = Outbox(session_id)
        self._protocol = ProtocolState(options, self._out)
        self._negotiated = False
        self._codec_version = "1.0"
        self._frame_index = 0
        self._first: Stamp | None = None
        self._close: tuple[str, str] | None = None  # (how, direction) of the first close
        self._finished = False
        self._websocket: HandshakeSeen | None = None  # set: the connection is STOMP over WebSocket
        self._ws_counts = {"ping": 0, "pong": 0, "close": 0}
        self._ws_close: Control | None = None  # the first close frame
        self._tls: TlsFacts | None = None  # set: the connection is STOMP (or WebSocket) over TLS
        # Plain STOMP inside TLS: by direction, what gives a plaintext offset's TCP offset
        self._tcp_offsets: dict[str, RecordOffsets] | None = None

    def __getstate__(self) -> tuple[None, dict[str, object]]:
        return slot_values(self)

    def __setstate__(self, state: tuple[None, dict[str, object]]) -> None:
        set_slot_values(self, state)

    # ---- input -----------------------------------------------------------------------------

    def on_data(
        self,
        direction: str,
        ts_ns: int,
        offset: int,
        data: bytes,
        source: tuple[str, int] | None = None,
        *,
        tcp_offset: int | None = None,
        whole_message: bool = False,
        tcp_frames: tuple[tuple[int, int], ...] = (),
    ) -> None:
        """``offset`` is the position in the direction's STOMP stream (the TCP stream, unless
        the connection is WebSocket: then ``tcp_offset`` is the position in the TCP stream of the
        WebSocket frame carrying the first byte, ``tcp_frames`` the (offset, TCP offset) of each
        later frame the bytes came from, and ``whole_message`` says ``data`` is a whole data
        message)."""
        stream = self._streams[direction]
        if not data:
            return
        if self._finished:
            detail = f"{len(data)} bytes after the connection was finished"
            self._out.anomaly(
                "tcp", "data_after_finish", direction, stream.make_stamp(ts_ns), offset, detail
            )
            return
        if stream.decoder is None:
            self._start(stream, offset, resync=self._mid_stream or offset != 0)
        elif offset != stream.next_offset:
            data, offset = self._align(stream, ts_ns, offset, data, source)
            if not data:
                return
        chunk = stream.make_chunk(offset, offset + len(data), ts_ns, source)
        if tcp_offset is not None:
            chunk.tcp_start = tcp_offset
            chunk.tcp_frames = tcp_frames
            chunk.beat_message = whole_message and not data.strip(b"\r\n")
        if self._first is None or ts_ns < self._first.ts_ns:
            self._first = chunk
        self._out.last = chunk
        stream.add_chunk(chunk)
        stream.decoder.feed(data)  # type: ignore[union-attr]
        self._process(stream)

    def on_data_run(
        self,
        direction: str,
        offset: int,
        data: bytes,
        sizes: list[int],
        timestamps: list[int],
        sources: list[tuple[str, int]],
    ) -> None:
        """``on_data`` of consecutive packets of one direction, joined in ``data`` (their
        ``sizes``, capture times and sources in lists): the same rows, with one decoder feed.
        Every packet keeps its chunk, so each frame and heart-beat keeps its packet's time."""
        stream = self._streams[direction]
        if self._finished or stream.decoder is None or offset != stream.next_offset:
            at = 0
            for size, ts_ns, source in zip(sizes, timestamps, sources, strict=True):
                self.on_data(direction, ts_ns, offset + at, data[at : at + size], source)
                at += size
            return
        chunks = stream.chunks
        first = len(chunks)
        stream.add_packets(offset, sizes, timestamps, sources)
        if len(chunks) == first:
            return
        if self._first is None or chunks[first].ts_ns < self._first.ts_ns:
            self._first = chunks[first]
        self._out.last = chunks[-1]
        stream.decoder.feed(data)
        self._process(stream)

    def on_gap(
        self,
        direction: str,
        ts_ns: int,
        offset: int,
        size: int,
        source: tuple[str, int] | None = None,
    ) -> None:
        """``source``: (file, record offset) of the packet that revealed the hole, if any."""
        stream = self._streams[direction]
        at = self._touch(ts_ns, source, offset)
        if self._finished or size <= 0:
            return
        if stream.decoder is None:
            self._start(stream, offset, resync=True)
        elif offset > stream.next_offset:  # an unannounced hole just before: merge them
            size += offset - stream.next_offset
            offset = stream.next_offset
        elif offset < stream.next_offset:
            overlap = stream.next_offset - offset
            if overlap >= size:
                return
            size -= overlap
            offset = stream.next_offset
        stream.decoder.feed_gap(size)  # type: ignore[union-attr]
        stream.next_offset = offset + size
        self._out.counts["gap_bytes"] += size
        self._out.anomaly("tcp", "gap", direction, at, offset, f"{size} bytes missing from capture")
        self._process(stream)

    def on_conflict(
        self,
        direction: str,
        ts_ns: int,
        offset: int,
        size: int,
        source: tuple[str, int] | None = None,
    ) -> None:
        at = self._touch(ts_ns, source, offset)
        self._out.counts["conflict_bytes"] += size
        detail = f"retransmission of {size} bytes differs from the data already seen"
        self._out.anomaly("tcp", "conflict", direction, at, offset, detail)

    def on_websocket_handshake(self, handshake: HandshakeSeen) -> None:
        """The connection is STOMP over WebSocket: the sessions row gets its upgrade, with any
        secret spelled out in its fields (a passcode in the URL query) masked."""
        self._websocket = handshake
        if handshake.request_ns is not None:
            self._touch(handshake.request_ns)  # the session starts with the upgrade request
        self._touch(handshake.ts_ns)

    def map_tcp_offsets(self, offsets: dict[str, RecordOffsets]) -> None:
        """The connection is TLS: its frames of plain STOMP get the TCP offset of the record
        that carried their first byte, from ``offsets`` (by direction), which the TLS transport
        keeps up to date."""
        self._tcp_offsets = offsets

    def on_tls(self, facts: TlsFacts) -> None:
        """The connection is carried by TLS: the sessions row gets what was negotiated, whether
        its records were decrypted, and the bytes and times of the records, read or not."""
        self._tls = facts
        for ts_ns in (facts.first_ns, facts.last_ns):
            if ts_ns is not None:
                self._touch(ts_ns)

    def on_websocket_control(self, control: Control, source: tuple[str, int] | None = None) -> None:
        at = self._touch(control.ts_ns, source, control.tcp_offset)
        self._ws_counts[control.kind] += 1
        if control.kind == "close" and self._ws_close is None:
            self._ws_close = control
        rtt = control.rtt_ns / 1e6 if control.rtt_ns is not None else None
        row = websocket_control_row(
            self.session_id,
            control.direction,
            SIDE[control.direction],
            control.kind,
            at,
            control.tcp_offset,
            control.payload_length,
            rtt,
            control.close_code,
            scrub_optional(control.close_reason, self._out.secrets)
            if control.kind == "close"
            else None,
        )
        self._out.tables["websocket_controls"].append(row)

    def on_websocket_violation(
        self, violation: Violation, source: tuple[str, int] | None = None
    ) -> None:
        """A WebSocket or TLS anomaly (a transport's: the TLS layer's kinds start with
        ``tls_``): ``stream_offset`` is its TCP offset, the detail tells the STOMP stream offset
        when there is one."""
        offset = violation.tcp_offset
        at = self._touch(violation.ts_ns, source, offset or 0)
        detail = violation.detail
        if violation.stomp_offset is not None:
            detail = f"{detail} (STOMP stream offset {violation.stomp_offset})"
        self._out.counts["violations"] += 1
        layer = "tls" if violation.kind.startswith("tls_") else "websocket"
        self._out.anomaly(layer, violation.kind, violation.direction, at, offset, detail)

    def on_close(self, direction: str, ts_ns: int, how: str) -> None:
        self._touch(ts_ns)
        if self._finished:
            return
        if self._close is None:
            self._close = (how, direction)
        self._end_stream(self._streams[direction])
        if self._protocol.open_errors:
            self._protocol.settle_errors(True)

    def finish(self, ts_ns: int, reason: str | None = None) -> None:
        if self._finished:
            return
        at = self._touch(ts_ns)
        for stream in self._streams.values():
            self._end_stream(stream)
        self._protocol.finish(None if reason == "capture_end" and self._close is None else True)
        self._out.tables["sessions"].append(self._session_row(at, reason))
        self._finished = True

    def drain(self, unsettled_limit: int = -1) -> dict[str, TableRows]:
        """The rows made since the last drain, by table. Once the connection is over, the rows
        of the MESSAGEs it left unsettled come at most ``unsettled_limit`` a drain (every one
        when negative); `rows_left` says whether some are still to come."""
        return self._out.drain(unsettled_limit)

    @property
    def rows_left(self) -> bool:
        return self._out.rows_left

    # ---- streams -----------------------------------------------------------------------------

    def _start(self, stream: DirectionStream, offset: int, *, resync: bool) -> None:
        stream.start(offset, self._codec_version, lenient=self.options.lenient, resync=resync)

    def _touch(self, ts_ns: int, source: tuple[str, int] | None = None, offset: int = 0) -> Stamp:
        """The stamp of an input; one that knows its packet gives anomalies a file position."""
        stream = self._streams[C2S]
        at = (
            stream.make_stamp(ts_ns)
            if source is None
            else stream.make_chunk(offset, offset, ts_ns, source)
        )
        # The earliest input, not the first fed: a WebSocket transport hands over the bytes it
        # held (an upgrade never finished) after the close that ended them was seen.
        if self._first is None or ts_ns < self._first.ts_ns:
            self._first = at
        self._out.last = at
        return at

    def _align(
        self,
        stream: DirectionStream,
        ts_ns: int,
        offset: int,
        data: bytes,
        source: tuple[str, int] | None,
    ) -> tuple[bytes, int]:
        """Data that does not start where the stream stands: after a hole, or partly seen."""
        expected = stream.next_offset
        if offset > expected:
            self.on_gap(stream.direction, ts_ns, expected, offset - expected, source)
            return data, offset
        overlap = expected - offset
        detail = f"{min(overlap, len(data))} bytes delivered twice were skipped"
        if source:
            at: Stamp = stream.make_chunk(offset, offset, ts_ns, source)
        else:
            at = stream.make_stamp(ts_ns)
        self._out.anomaly("tcp", "overlap", stream.direction, at, offset, detail)
        return data[overlap:], expected

    def _end_stream(self, stream: DirectionStream) -> None:
        if stream.decoder is not None and not stream.eof:
            stream.eof = True
            stream.decoder.feed_eof()
            self._process(stream)

    def _process(self, stream: DirectionStream) -> None:
        decoder = stream.decoder
        assert decoder is not None
        if self._negotiated:
            events: Iterable[Event | _NeedData] = decoder.events()
        else:  # one at a time: CONNECTED switches the version before the next frame is framed
            events = iter(decoder.next_event, NEED_DATA)
        for event in events:
            kind = type(event)
            if kind is Frame:
                self._on_frame(stream, event)  # type: ignore[arg-type]
            elif kind is HeartBeat:
                self._on_heartbeat(stream, event)  # type: ignore[arg-type]
            else:
                assert isinstance(event, StompViolation)  # runs per violation only
                at = stream.chunk_at(event.offset)
                self._out.violation(event.kind, stream.direction, at, event.offset, event.detail)
        stream.prune()

    def _on_heartbeat(self, stream: DirectionStream, beat: HeartBeat) -> None:
        end = beat.offset + beat.length
        stream.consumed(end)
        chunk = stream.chunk_at(beat.offset)
        assert chunk is not None
        if beat.offset == stream.trailer_end and stream.is_trailing_eol(chunk, beat.offset):
            stream.trailer_end = end
            stream.trailer_chunk = chunk
            return
        stream.heartbeats += 1
        previous = stream.chunk_at(beat.offset - 1) if beat.offset > stream.origin else None
        gap_ms = elapsed_ms(previous.ts_ns, chunk.ts_ns) if previous is not None else None
        row = heartbeat_row(
            self.session_id,
            stream.direction,
            chunk,
            beat.offset,
            gap_ms,
            stream.expected_ms,
            self.options.late_thresholds,
        )
        self._out.tables["heartbeats"].append(row)

    def _on_frame(self, stream: DirectionStream, frame: Frame) -> None:
        first = stream.chunk_at(frame.start)
        last = stream.chunk_at(frame.end - 1)
        assert first is not None and last is not None
        index = self._frame_index
        self._frame_index = index + 1
        stream.frames += 1
        stream.trailer_end = frame.end
        stream.trailer_chunk = last
        stream.consumed(frame.end)
        out = self._out
        command = frame.command
        direction = stream.direction
        header_list = frame.header_list
        headers = frame.headers
        if command in CONNECT_COMMANDS or has_secret_header(headers):
            header_list, secrets = protect_headers(header_list, self.options.login_hash_key)
            headers = first_values(header_list)
            if secrets:
                out.add_secrets(secrets)
        body = body_fields(frame.body, self.options)
        stored_command = command
        if command not in ALL_COMMANDS:  # broken framing can make a header line the command
            stored_command = scrub(command, out.secrets)
        if command == "ERROR":  # brokers may echo a rejected login, CONNECT captured or not
            header_list = [(name, scrub(value, out.secrets)) for name, value in header_list]
            headers = first_values(header_list)
            body = scrub_body(body, out.secrets)
        violation = None
        if frame.violations:
            violation = ",".join(dict.fromkeys([v.kind for v in frame.violations]))
            for v in frame.violations:
                out.violation(v.kind, direction, stream.chunk_at(v.offset), v.offset, v.detail)
        if self._websocket is not None:
            tcp_offset = first.tcp_offset_of(frame.start)
        elif self._tcp_offsets is not None:
            offsets = self._tcp_offsets[direction]
            tcp_offset = offsets.tcp_of(frame.start)
        else:
            tcp_offset = None
        out.frames.add(
            self.session_id,
            direction,
            index,
            first.ts_ns,
            last.ts_ns,
            stored_command,
            headers,
            header_list,
            frame.content_length,
            body,
            frame.start,
            frame.end - frame.start,
            frame.start if tcp_offset is None else tcp_offset,
            violation,
        )
        self._protocol.on_frame(direction, index, headers, frame, body, first)
        if command == "CONNECTED" and not self._negotiated:
            self._apply_handshake()

    def _apply_handshake(self) -> None:
        """CONNECTED arrived: decode by the negotiated version, expect the negotiated beats."""
        handshake = self._protocol.handshake
        if handshake.connected_at is None:
            return  # CONNECTED in the wrong direction
        self._negotiated = True
        codec = decoder_version(handshake.version or "")
        if codec is not None:
            self._codec_version = codec
            for stream in self._streams.values():
                if stream.decoder is not None:
                    stream.decoder.version = codec
        c2s, s2c = handshake.intervals or (0, 0)
        self._streams[C2S].expected_ms = c2s or None
        self._streams[S2C].expected_ms = s2c or None

    # ---- the sessions row --------------------------------------------------------------------

    def _session_row(self, ended: Stamp, reason: str | None) -> Row:
        started = self._first or ended
        c2s, s2c = self._streams[C2S], self._streams[S2C]
        close = self._close
        protocol = self._protocol
        return {
            "session_id": self.session_id,
            "client_ip": self.client.ip,
            "client_port": self.client.port,
            "server_ip": self.server.ip,
            "server_port": self.server.port,
            "started_at": started.ts,
            "started_at_ns": started.ts_ns,
            "ended_at": ended.ts,
            "ended_at_ns": ended.ts_ns,
            "duration_ms": elapsed_ms(started.ts_ns, ended.ts_ns),
            **protocol.handshake.columns(),
            "end_reason": self._end_reason(close[0] if close else None, reason),
            "closed_by": SIDE[close[1]] if close else None,
            "c2s_bytes": c2s.bytes,
            "s2c_bytes": s2c.bytes,
            "c2s_frames": c2s.frames,
            "s2c_frames": s2c.frames,
            "c2s_heartbeats": c2s.heartbeats,
            "s2c_heartbeats": s2c.heartbeats,
            **self._out.counts,
            "unacked_messages": protocol.ledger.unacked,
            **self._websocket_columns(),
            **self._tls_columns(),
            "date": started.date,
        }

    def _end_reason(self, close: str | None, reason: str | None) -> str:
        protocol = self._protocol
        closed_by_websocket = self._ws_close is not None and not protocol.disconnected
        if closed_by_websocket and protocol.last_command != "ERROR":
            return "websocket_close"
        return protocol.end_reason(close, reason)

    def _tls_columns(self) -> dict[str, object]:
        tls = self._tls
        if tls is None:
            return dict.fromkeys(TLS_COLUMNS)
        secrets = self._out.secrets
        return {
            "transport": "websocket+tls" if self._websocket is not None else "tls",
            "tls_version": tls.version,
            "tls_cipher_suite": tls.cipher_suite,
            "tls_server_name": scrub_optional(tls.server_name, secrets),
            "tls_alpn": scrub_optional(tls.alpn, secrets),
            "tls_decrypted": tls.decrypted,
            "tls_not_decrypted_reason": tls.not_decrypted_reason,
            "c2s_bytes": tls.wire_bytes[C2S],
            "s2c_bytes": tls.wire_bytes[S2C],
        }

    def _websocket_columns(self) -> dict[str, object]:
        ws = self._websocket
        if ws is None:
            return {"transport": "tcp", **dict.fromkeys(WEBSOCKET_COLUMNS)}
        close = self._ws_close
        counts = self._ws_counts
        secrets = self._out.secrets
        return {
            "transport": "websocket",
            "ws_path": scrub_optional(ws.path, secrets),
            "ws_origin": scrub_optional(ws.origin, secrets),
            "ws_user_agent": scrub_optional(ws.user_agent, secrets),
            "ws_subprotocols_offered": scrub_optional(ws.subprotocols_offered, secrets),
            "ws_subprotocol": scrub_optional(ws.subprotocol, secrets),
            "ws_extensions": scrub_optional(ws.extensions, secrets),
            "ws_status": ws.status,
            "ws_pings": counts["ping"],
            "ws_pongs": counts["pong"],
            "ws_close_code": close.close_code if close else None,
            "ws_close_reason": scrub_optional(close.close_reason, secrets) if close else None,
            "ws_closed_by": SIDE[close.direction] if close else None,
        }
