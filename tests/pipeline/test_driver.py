"""ConnectionDriver: one 4-tuple's packets in, table rows out, played as a transcript."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from pipeline.driver import ConnectionDriver, DriverConfig
from pipeline.ingest.records import ACK, FIN, SYN, TcpPacket
from pipeline.session import ModelOptions
from pipeline.session.frame_rows import TableRows
from pipeline.session.rows import TableRow
from pipeline.spark.flows import STATE_KIND, FlowPassConfig, FlowRunner
from pipeline.spark.pieces import PACKET_DTYPE, Piece, flow_key
from pipeline.websocket import Transport
from tests.support.flow_rows import SunkRows

CLIENT = ("10.0.0.1", 40000)
SERVER = ("10.0.0.2", 61613)
T0 = 1_700_000_000_000_000_000
CONNECT = b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00"
SEND = b"SEND\ndestination:/queue/a\n\nhello\x00"


class Flow:
    """Packets of one 4-tuple, their payloads in one file, as a capture would give them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.blob = bytearray()
        self.packets: list[tuple[TcpPacket, bytes]] = []

    def packet(
        self, from_client: bool, seq: int, flags: int, payload: bytes = b"", ack: int = 0
    ) -> None:
        (sip, sport), (dip, dport) = (CLIENT, SERVER) if from_client else (SERVER, CLIENT)
        ts = T0 + len(self.packets) * 1_000_000
        packet = TcpPacket(
            ts, sip, sport, dip, dport, seq, ack, flags, 65535,
            len(self.blob), len(payload), len(payload), len(self.packets),
        )  # fmt: skip
        self.blob += payload
        self.packets.append((packet, payload))

    def run(
        self, *, close_open: bool = True, websocket_max_held: int | None = None
    ) -> dict[str, TableRows]:
        """The driver's tables, fed packet by packet; a carried state shows as `_state`.
        With ``websocket_max_held``, the WebSocket transport never holds more (plus a packet)."""
        config = DriverConfig(close_open=close_open)
        if websocket_max_held is not None:
            config = DriverConfig(close_open=close_open, websocket_max_held=websocket_max_held)
        driver = ConnectionDriver(config)
        for packet, payload in self.packets:
            driver.packet(packet, payload, (str(self.path), packet.record_offset))
            transport = driver._state.transport if driver._state is not None else None
            if websocket_max_held is not None and isinstance(transport, Transport):
                sizes = transport._held_bytes.values()
                assert all(size <= websocket_max_held + len(payload) for size in sizes)
        tables: dict[str, TableRows] = dict(driver.drain())
        state = driver.end()
        for table, rows in driver.drain().items():
            held = tables.get(table)
            if held is None:
                tables[table] = rows
            else:
                held.extend(rows)
        if state is not None:
            tables[STATE_KIND] = [{"state": state}]
        return tables

    def run_as_pieces(
        self,
        *,
        close_open: bool = True,
        options: ModelOptions | None = None,
        sink: SunkRows | None = None,
        batch_rows: int | None = None,
    ) -> dict[str, list[TableRow]]:
        """The same packets as one flow piece through the Spark side's FlowRunner."""
        self.path.write_bytes(bytes(self.blob))
        key = flow_key(*CLIENT, *SERVER)
        records = np.zeros(len(self.packets), dtype=PACKET_DTYPE)
        for index, (p, _payload) in enumerate(self.packets):
            reverse = (p.src_ip, p.src_port) != min(CLIENT, SERVER)
            records[index] = (
                p.ts_ns, p.payload_offset, p.record_offset, p.seq, p.ack, p.payload_len,
                p.wire_len, p.window, p.flags, reverse, 0,
            )  # fmt: skip
        held = sink or SunkRows()
        config = FlowPassConfig(
            (str(self.path),), options=options or ModelOptions(), close_open=close_open
        )
        runner = FlowRunner(config, held, batch_rows=batch_rows)
        runner.feed_piece(Piece(key, 0, records))
        runner.close()
        tables: dict[str, list[TableRow]] = {}
        for kind, rows, _keys in held.items():
            tables.setdefault(kind, []).extend(rows)
        return tables


def test_data_held_behind_a_lost_segment_until_the_capture_ends(tmp_path: Path) -> None:
    # Nothing reaches the model before the end of the input: the first data segment was lost,
    # so the rest waits in the reassembler, and the tracker has let go of the connection by the
    # time the end of the input delivers it.
    flow = Flow(tmp_path / "payloads")
    flow.packet(True, 100, SYN)
    flow.packet(False, 900, SYN | ACK, ack=101)
    flow.packet(True, 101 + len(CONNECT), ACK, SEND)  # the CONNECT before it was not captured
    tables = flow.run()
    (session,) = tables["sessions"]
    assert session["client_port"] == CLIENT[1] and session["end_reason"] == "capture_end"
    assert [f["command"] for f in tables["frames"]] == ["SEND"]
    assert [a["kind"] for a in tables["anomalies"]][:1] == ["gap"]


def test_data_flushed_by_a_new_connection_belongs_to_the_old_one(tmp_path: Path) -> None:
    flow = Flow(tmp_path / "payloads")
    flow.packet(True, 100, SYN)
    flow.packet(False, 900, SYN | ACK, ack=101)
    flow.packet(True, 101 + len(CONNECT), ACK, SEND)  # waits behind the lost CONNECT
    flow.packet(True, 5000, SYN)  # the port is reused: the first connection is over
    flow.packet(False, 7000, SYN | ACK, ack=5001)
    flow.packet(True, 5001, ACK, CONNECT)
    flow.packet(True, 5001 + len(CONNECT), FIN | ACK)
    flow.packet(False, 7001, FIN | ACK)
    tables = flow.run()
    first, second = sorted(tables["sessions"], key=lambda s: s["started_at_ns"])
    frames = {(f["session_id"], f["command"]) for f in tables["frames"]}
    assert frames == {(first["session_id"], "SEND"), (second["session_id"], "CONNECT")}
    assert first["session_id"] != second["session_id"]


def test_frames_behind_a_lost_segment_come_before_the_close(tmp_path: Path) -> None:
    flow = Flow(tmp_path / "payloads")
    flow.packet(True, 100, SYN)
    flow.packet(False, 900, SYN | ACK, ack=101)
    flow.packet(True, 101, ACK, CONNECT)
    flow.packet(True, 101 + len(CONNECT) + len(SEND), ACK, SEND)  # the first SEND was lost
    flow.packet(True, 101 + len(CONNECT) + 2 * len(SEND), FIN | ACK)
    flow.packet(False, 901, FIN | ACK)
    tables = flow.run(close_open=False)
    assert [f["command"] for f in tables["frames"]] == ["CONNECT", "SEND"]
    kinds = [a["kind"] for a in tables["anomalies"]]
    assert "gap" in kinds and "data_after_eof" not in kinds
    (session,) = tables["sessions"]
    assert session["closed_by"] == "client" and session["gap_bytes"] == len(SEND)


def test_a_flow_piece_through_the_runner_gives_the_same_tables(tmp_path: Path) -> None:
    # The runner takes bare ACKs without building packets; the tables must not change.
    flow = Flow(tmp_path / "payloads")
    flow.packet(True, 100, SYN)
    flow.packet(False, 900, SYN | ACK, ack=101)
    flow.packet(True, 101, ACK, ack=901)
    flow.packet(True, 101, ACK, CONNECT, ack=901)
    flow.packet(False, 901, ACK, ack=101 + len(CONNECT))
    flow.packet(True, 101 + len(CONNECT), ACK, SEND, ack=901)
    flow.packet(True, 101 + len(CONNECT) + len(SEND), FIN | ACK)
    flow.packet(False, 901, FIN | ACK)
    by_packet = flow.run()
    assert [f["command"] for f in by_packet["frames"]] == ["CONNECT", "SEND"]
    assert flow.run_as_pieces() == by_packet


def _lagging_consumer(path: Path, messages: int) -> Flow:
    """A client-individual consumer that acks none of ``messages`` MESSAGEs, then closes."""
    flow = Flow(path)
    flow.packet(True, 100, SYN)
    flow.packet(False, 900, SYN | ACK, ack=101)
    client, server = 101, 901
    connected = b"CONNECTED\nversion:1.2\n\n\x00"
    subscribe = b"SUBSCRIBE\nid:0\ndestination:/queue/a\nack:client-individual\n\n\x00"
    for from_client, payload in [(True, CONNECT), (False, connected), (True, subscribe)]:
        flow.packet(from_client, client if from_client else server, ACK, payload)
        client, server = (
            (client + len(payload), server) if from_client else (client, server + len(payload))
        )
    for n in range(messages):
        message = b"MESSAGE\nsubscription:0\nmessage-id:m%d\nack:a%d\n\nbody %d\x00" % (n, n, n)
        flow.packet(False, server, ACK, message)
        server += len(message)
    flow.packet(True, client, FIN | ACK)
    flow.packet(False, server, FIN | ACK)
    return flow


def _row_dicts(tables: Mapping[str, TableRows], names: tuple[str, ...]) -> dict[str, list[dict]]:
    return {name: [dict(row) for row in tables.get(name, [])] for name in names}


LEFT_UNSETTLED = ("messages", "subscriptions", "sessions", "anomalies")


def test_rows_of_messages_left_unsettled_are_drained_a_part_at_a_time(tmp_path: Path) -> None:
    flow = _lagging_consumer(tmp_path / "payloads", 50)
    expected = _row_dicts(flow.run(), LEFT_UNSETTLED)  # every row in memory, drained at once
    assert len(expected["messages"]) == 50
    assert {m["ack_outcome"] for m in expected["messages"]} == {"none"}
    spilling = ModelOptions(max_pending_in_memory=5)
    driver = ConnectionDriver(DriverConfig(options=spilling, close_open=True))
    for packet, payload in flow.packets:
        driver.packet(packet, payload, (str(flow.path), packet.record_offset))
    assert driver.end() is None
    tables: dict[str, TableRows] = {}
    parts = []
    while True:
        drained = driver.drain(7)
        parts.append(len(drained.get("messages", [])))
        for name, rows in drained.items():
            tables.setdefault(name, []).extend(rows)
        if not driver.rows_left:
            break
    assert max(parts) <= 7 and sum(parts) == 50
    assert _row_dicts(tables, LEFT_UNSETTLED) == expected


def test_the_runner_hands_rows_left_unsettled_to_its_writer_a_batch_at_a_time(
    tmp_path: Path,
) -> None:
    flow = _lagging_consumer(tmp_path / "payloads", 50)
    expected = _row_dicts(flow.run(), LEFT_UNSETTLED)
    sink = CountedRows()
    spilling = ModelOptions(max_pending_in_memory=5)
    tables = flow.run_as_pieces(options=spilling, sink=sink, batch_rows=7)
    assert _row_dicts(tables, LEFT_UNSETTLED) == expected
    batches = [count for kind, count in sink.batches if kind == "messages"]
    assert sum(batches) == 50 and len(batches) >= 4 and max(batches) <= 2 * 7


class CountedRows(SunkRows):
    """Also the size of each hand-over, by table."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[tuple[str, int]] = []

    def __call__(self, kind: str, rows: TableRows, keys: list[str | None]) -> None:
        self.batches.append((kind, len(rows)))
        super().__call__(kind, rows, keys)


def test_last_acks_of_a_connection_closed_in_an_earlier_batch_make_no_session(
    tmp_path: Path,
) -> None:
    for close_open in (True, False):
        flow = Flow(tmp_path / "payloads")
        flow.packet(False, 901, FIN | ACK, ack=500)  # the client's FIN came in the last batch
        flow.packet(True, 500, ACK, ack=902)
        tables = flow.run(close_open=close_open)
        assert "sessions" not in tables and "_state" not in tables  # nor carried
        (stray,) = tables["anomalies"]
        assert stray["kind"] == "stray_packets" and stray["session_id"] is None
        assert stray["file"] == str(flow.path) and stray["file_offset"] == 0
        assert stray["ts_ns"] == T0 and "2 packets without payload" in stray["detail"]


def test_a_connection_seen_from_its_middle_with_payload_is_a_session(tmp_path: Path) -> None:
    flow = Flow(tmp_path / "payloads")
    flow.packet(True, 500, ACK, ack=902)
    flow.packet(True, 500, ACK, SEND, ack=902)
    (session,) = flow.run()["sessions"]
    assert session["c2s_frames"] == 1


def test_an_upgrade_never_answered_is_bounded_then_decoded_as_tcp(tmp_path: Path) -> None:
    """An upgrade request, then many small client packets and no response: the transport holds
    at most its bound, one anomaly says so, and every byte is counted and decoded as TCP."""
    upgrade = (
        b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    flow = Flow(tmp_path / "payloads")
    flow.packet(True, 100, SYN)
    flow.packet(False, 900, SYN | ACK, ack=101)
    flow.packet(True, 101, ACK, upgrade, ack=901)
    seq = 101 + len(upgrade)
    for _ in range(2000):
        flow.packet(True, seq, ACK, SEND, ack=901)
        seq += len(SEND)
    flow.packet(True, seq, FIN | ACK, ack=901)
    flow.packet(False, 901, FIN | ACK, ack=seq + 1)
    tables = flow.run(websocket_max_held=4096)
    kinds = [a["kind"] for a in tables["anomalies"] if a["source"] == "websocket"]
    assert kinds == ["websocket_upgrade_unfinished"]
    (session,) = tables["sessions"]
    assert session["c2s_bytes"] == len(upgrade) + 2000 * len(SEND)
    assert [f["command"] for f in tables["frames"]].count("SEND") == 1999  # one ran into the GET


def test_the_flow_pass_sets_the_websocket_bound() -> None:
    config = FlowPassConfig(("x.pcap",), websocket_max_held=1000)
    assert config.driver.websocket_max_held == 1000
    assert FlowPassConfig(("x.pcap",)).driver.websocket_max_held == 64 * 1024
