"""Real STOMP-over-TLS captures (tests/data/tls, made by scripts/make_tls_captures.py from
RabbitMQ and ActiveMQ with stomp.py writing a key log): reassembled by the repo's own
reassembly, decrypted by `TlsSession`, decoded by the STOMP decoder, and checked against what
the client itself sent and received, and against tshark's own decryption."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pipeline.ingest.secrets import embedded_keylogs
from pipeline.net import Direction
from pipeline.reassembly import Closed, Data, Gap, Opened, Segment
from pipeline.stomp import Decoder
from pipeline.stomp.events import Frame, HeartBeat
from pipeline.tls import KeyLog, Plaintext, TlsAnomaly, TlsFacts, TlsSession, read_keylogs
from pipeline.tls.transport import TlsTransport
from pipeline.websocket.events import StompData, Violation
from tests.support.local_reassembly import LocalReassembly

DATA = Path(__file__).resolve().parents[2] / "data" / "tls"

TLS13 = "rabbitmq-stomp-tls13"
TLS12_CHACHA = "rabbitmq-stomp-tls12-chacha"
ACTIVEMQ_GCM = "activemq-stomp-ssl-tls12-gcm"
LARGE = "rabbitmq-stomp-tls13-large"
MISSING_KEY = "rabbitmq-stomp-tls13-missing-key"
WSS = "rabbitmq-web-stomp-tls13"

# What each capture negotiated, as the ServerHello names it.
NEGOTIATED = {
    TLS13: ("TLS 1.3", "TLS_AES_256_GCM_SHA384"),
    TLS12_CHACHA: ("TLS 1.2", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"),
    ACTIVEMQ_GCM: ("TLS 1.2", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"),
    LARGE: ("TLS 1.3", "TLS_AES_256_GCM_SHA384"),
    MISSING_KEY: ("TLS 1.3", "TLS_AES_256_GCM_SHA384"),
    WSS: ("TLS 1.3", "TLS_AES_256_GCM_SHA384"),
}
# The key headers the client's record keeps of each frame.
KEY_HEADERS = ("destination", "receipt", "receipt-id", "id", "message-id", "subscription", "ack")


@dataclass
class Decrypted:
    """One connection of a capture after the TLS layer: its facts, each direction's plaintext
    and the anomalies."""

    client_port: int
    facts: TlsFacts | None = None
    plaintext: dict[Direction, bytearray] = field(
        default_factory=lambda: {Direction.C2S: bytearray(), Direction.S2C: bytearray()}
    )
    anomalies: list[TlsAnomaly] = field(default_factory=list)


def decrypt(capture: Path, keylog: KeyLog) -> list[Decrypted]:
    """Each connection of `capture`, its two reassembled streams fed to a `TlsSession` in the
    order their bytes crossed, in the order the connections opened."""
    live: dict[str, tuple[TlsSession, Decrypted]] = {}
    done: list[Decrypted] = []
    for event in LocalReassembly([str(capture)]):
        if type(event) is Opened:
            conn = event.connection
            live[conn.connection_id] = (TlsSession(keylog.get), Decrypted(conn.client_port))
            done.append(live[conn.connection_id][1])
        elif type(event) is Segment:
            session, seen = live[event.connection_id]
            direction = Direction.C2S if event.from_client else Direction.S2C
            inner = event.event
            if type(inner) is Data:
                events = session.receive(direction, inner.ts_ns, inner.offset, inner.data)
            elif type(inner) is Gap:
                events = session.receive_gap(direction, inner.ts_ns, inner.offset, inner.size)
            else:
                continue
            for item in events:
                if type(item) is Plaintext:
                    assert item.offset == len(seen.plaintext[direction])
                    seen.plaintext[direction] += item.data
                else:
                    assert type(item) is TlsAnomaly
                    seen.anomalies.append(item)
        elif type(event) is Closed:
            session, seen = live.pop(event.connection.connection_id)
            seen.facts = session.finish()
    return done


@dataclass
class Decoded:
    frames: list[Frame]
    eols: list[HeartBeat]

    @property
    def eols_between_frames(self) -> int:
        """EOLs not right after a frame's NUL: heart-beats for certain (the brokers end every
        frame with NUL LF; stomp.py ends its with a bare NUL, so all its EOLs are beats)."""
        ends = {frame.end for frame in self.frames}
        return sum(1 for eol in self.eols if eol.offset not in ends)


def decode(stream: bytes) -> Decoded:
    decoder = Decoder("1.2")
    decoder.feed(stream)
    items = decoder.events()
    frames = [item for item in items if type(item) is Frame]
    return Decoded(frames, [item for item in items if type(item) is HeartBeat])


def as_record(frame: Frame) -> dict[str, Any]:
    """A decoded frame in the shape of the client's record of it (its body's length, its key
    headers)."""
    return {
        "command": frame.command,
        "headers": {k: v for k, v in frame.headers.items() if k in KEY_HEADERS},
        "body_length": len(frame.body),
    }


def recorded(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: f[k] for k in ("command", "headers", "body_length")} for f in frames]


def record_of(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DATA / f"{name}.record.json").read_text())
    return loaded


def connections_of(name: str) -> list[Decrypted]:
    return decrypt(DATA / f"{name}.pcap", read_keylogs([DATA / f"{name}.keys"]))


def assert_matches_record(seen: Decrypted, client: dict[str, Any]) -> None:
    sent = decode(bytes(seen.plaintext[Direction.C2S]))
    received = decode(bytes(seen.plaintext[Direction.S2C]))
    assert [as_record(f) for f in sent.frames] == recorded(client["sent_frames"])
    assert [as_record(f) for f in received.frames] == recorded(client["received_frames"])
    commands: dict[str, int] = {}
    for frame in sent.frames:
        commands[frame.command] = commands.get(frame.command, 0) + 1
    assert commands == client["sent"]
    messages = [f for f in received.frames if f.command == "MESSAGE"]
    assert [f.headers["message-id"] for f in messages] == client["message_ids"]
    receipts = [f.headers["receipt-id"] for f in received.frames if f.command == "RECEIPT"]
    assert receipts == client["receipts"]
    acks = [f.headers["id"] for f in sent.frames if f.command == "ACK"]
    assert acks == client["acked"]
    assert len(sent.eols) == client["heart_beats_sent"]
    # stomp.py counts the broker's beats per read, several in one read counting once
    assert received.eols_between_frames >= client["heart_beats_received"]
    bodies = [hashlib.sha256(f.body).hexdigest() for f in sent.frames + received.frames]
    expected = [f["body_sha256"] for f in client["sent_frames"] + client["received_frames"]]
    assert bodies == expected


@pytest.mark.parametrize("name", [TLS13, TLS12_CHACHA, ACTIVEMQ_GCM, LARGE])
def test_a_real_capture_decrypts_to_what_the_client_sent_and_received(name: str) -> None:
    record = record_of(name)
    [seen] = connections_of(name)
    [client] = record["connections"]
    assert seen.facts is not None
    assert seen.facts.decrypted and seen.facts.not_decrypted_reason is None
    assert (seen.facts.version, seen.facts.cipher_suite) == NEGOTIATED[name]
    assert seen.facts.server_name == client["tls"]["server_name"] == "stomp-lake.test"
    assert seen.anomalies == []
    assert_matches_record(seen, client)


def test_a_key_update_both_ways_keeps_decrypting() -> None:
    """The TLS 1.3 client asked for a KeyUpdate half-way (before its ACKs), and RabbitMQ
    answered with its own: the frames after it decrypt under the next traffic secrets."""
    [client] = record_of(TLS13)["connections"]
    assert client["tls"]["key_update"] == "client, requested"
    [seen] = connections_of(TLS13)
    sent = decode(bytes(seen.plaintext[Direction.C2S]))
    assert [f.command for f in sent.frames][-7:] == ["ACK"] * 5 + ["NACK", "DISCONNECT"]


def records_spanning_segments(capture: Path) -> dict[Direction, tuple[int, int]]:
    """(TLS records, records cut by a TCP segment boundary) of each direction of the capture's
    one connection."""
    streams = {Direction.C2S: bytearray(), Direction.S2C: bytearray()}
    starts: dict[Direction, set[int]] = {Direction.C2S: set(), Direction.S2C: set()}
    for event in LocalReassembly([str(capture)]):
        if type(event) is Segment and type(event.event) is Data:
            direction = Direction.C2S if event.from_client else Direction.S2C
            starts[direction].add(event.event.offset)
            streams[direction] += event.event.data
    counts = {}
    for direction, stream in streams.items():
        records = cut = position = 0
        while position + 5 <= len(stream):
            end = position + 5 + int.from_bytes(stream[position + 3 : position + 5], "big")
            records += 1
            cut += any(position < start < end for start in starts[direction])
            position = end
        counts[direction] = (records, cut)
    return counts


def test_a_large_body_spans_many_records_and_segments() -> None:
    """200 KB each way in 16 KB records, the client's socket buffers shrunk to 8 KiB: the
    records are cut across TCP segments both ways, and the body comes out whole."""
    [client] = record_of(LARGE)["connections"]
    [seen] = connections_of(LARGE)
    for direction, command in ((Direction.C2S, "SEND"), (Direction.S2C, "MESSAGE")):
        frames = decode(bytes(seen.plaintext[direction])).frames
        [frame] = [f for f in frames if f.command == command]
        assert len(frame.body) == 200_000
    sizes = {f["command"]: f["body_length"] for f in client["sent_frames"]}
    assert sizes["SEND"] == 200_000
    for records, cut in records_spanning_segments(DATA / f"{LARGE}.pcap").values():
        assert records > 12 and cut >= 4, (records, cut)


def test_the_connection_whose_keys_are_missing_is_not_decrypted() -> None:
    record = record_of(MISSING_KEY)
    first, second = connections_of(MISSING_KEY)
    lost, kept = record["connections"]
    assert not lost["keys_in_keylog"] and kept["keys_in_keylog"]
    assert first.facts is not None and second.facts is not None
    assert not first.facts.decrypted
    assert first.facts.not_decrypted_reason == "no_keys"
    assert first.facts.version == "TLS 1.3" and first.facts.server_name == "stomp-lake.test"
    assert first.plaintext == {Direction.C2S: bytearray(), Direction.S2C: bytearray()}
    assert [a.kind for a in first.anomalies] == ["tls_no_keys"]  # at its ClientHello
    assert second.facts.decrypted and second.facts.not_decrypted_reason is None
    assert_matches_record(second, kept)


def test_the_key_log_embedded_in_a_pcapng_decrypts_it() -> None:
    """The TLS 1.3 capture with its key log as a Decryption Secrets Block (editcap): the
    embedded secrets alone decrypt it to what the client recorded."""
    dsb = DATA / f"{TLS13}-dsb.pcapng"
    [text] = embedded_keylogs(dsb)
    keylog = KeyLog()
    keylog.add_lines(text.splitlines())
    [seen] = decrypt(dsb, keylog)
    [client] = record_of(TLS13)["connections"]
    assert seen.facts is not None and seen.facts.decrypted
    assert_matches_record(seen, client)


def stomp_over_wss(name: str) -> dict[Direction, bytes]:
    """The STOMP bytes of each direction of the capture's one connection, through
    `TlsTransport`: the TLS layer's plaintext into the WebSocket transport."""
    keylog = read_keylogs([DATA / f"{name}.keys"])
    transport: TlsTransport | None = None
    stomp = {Direction.C2S: bytearray(), Direction.S2C: bytearray()}
    for event in LocalReassembly([str(DATA / f"{name}.pcap")]):
        if type(event) is Opened:
            transport = TlsTransport(keylog.get)
        elif type(event) is Segment and type(event.event) is Data:
            assert transport is not None
            direction = Direction.C2S if event.from_client else Direction.S2C
            data = event.event
            for item in transport.receive(direction, data.ts_ns, data.offset, data.data):
                assert type(item) is not Violation, item
                if type(item) is StompData:
                    stomp[Direction(item.direction)] += item.data
    assert transport is not None and transport.websocket
    return {d: bytes(data) for d, data in stomp.items()}


def test_web_stomp_over_wss_decrypts_to_what_the_client_sent_and_received() -> None:
    """stomp.py's WSStompConnection to RabbitMQ web-stomp over wss://: TLS 1.3, then the HTTP
    upgrade and WebSocket frames inside, the STOMP frames inside those."""
    [client] = record_of(WSS)["connections"]
    [seen] = connections_of(WSS)
    assert seen.facts is not None and seen.facts.decrypted
    assert (seen.facts.version, seen.facts.cipher_suite) == NEGOTIATED[WSS]
    assert seen.facts.server_name == "stomp-lake.test"
    assert seen.plaintext[Direction.C2S].startswith(b"GET /ws HTTP/1.1\r\n")
    assert seen.plaintext[Direction.S2C].startswith(b"HTTP/1.1 101 Switching Protocols\r\n")
    stomp = stomp_over_wss(WSS)
    inner = Decrypted(seen.client_port, seen.facts)
    for direction, data in stomp.items():
        inner.plaintext[direction] += data
    assert_matches_record(inner, client)


# ---- tshark's check ----------------------------------------------------------------------------


def tshark_plaintext(
    capture: Path, keys: Path | None, stream: int, server_port: int
) -> dict[Direction, bytes]:
    """`tshark -z follow,tls,raw,N`: one decrypted record per line in hex, node 0's unindented
    and node 1's after a tab. tshark 4.0 names the server node 0 when its own data comes first
    (and node 1 ``:0``), so the directions follow from node 0's port."""
    argv = ["tshark", "-r", str(capture), "-q", "-z", f"follow,tls,raw,{stream}"]
    if keys is not None:
        argv += ["-o", f"tls.keylog_file:{keys}"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=120).stdout
    streams = {Direction.C2S: bytearray(), Direction.S2C: bytearray()}
    node0 = Direction.C2S
    for line in out.split("=" * 67)[1].splitlines():
        if line.startswith("Node 0:"):
            node0 = Direction.S2C if line.endswith(f":{server_port}") else Direction.C2S
        elif line.strip() and ":" not in line:  # not "Follow: ...", "Filter: ...", "Node N: ..."
            direction = node0.reverse if line.startswith("\t") else node0
            streams[direction] += bytes.fromhex(line.strip())
    return {d: bytes(data) for d, data in streams.items()}


TSHARK = shutil.which("tshark")


@pytest.mark.skipif(TSHARK is None, reason="tshark missing (Debian package 'tshark')")
@pytest.mark.parametrize("name", [TLS13, TLS12_CHACHA, ACTIVEMQ_GCM, LARGE, MISSING_KEY, WSS])
def test_tshark_decrypts_the_same_bytes(name: str) -> None:
    port = record_of(name)["port"]
    for stream, seen in enumerate(connections_of(name)):
        theirs = tshark_plaintext(DATA / f"{name}.pcap", DATA / f"{name}.keys", stream, port)
        assert theirs == {d: bytes(data) for d, data in seen.plaintext.items()}


@pytest.mark.skipif(TSHARK is None, reason="tshark missing (Debian package 'tshark')")
def test_tshark_decrypts_the_pcapng_with_its_embedded_secrets_alike() -> None:
    port = record_of(TLS13)["port"]
    [seen] = connections_of(TLS13)
    theirs = tshark_plaintext(DATA / f"{TLS13}-dsb.pcapng", None, 0, port)
    assert theirs == {d: bytes(data) for d, data in seen.plaintext.items()}
