"""Broker-like STOMP traffic of any size, written as rotated pcapng files, in bounded memory.

Connections come and go (several hundred over a capture, `concurrent` open at once) between
clients and one broker on port 61613; each is a producer (SEND, a receipt asked for every few
messages, answered by RECEIPT) or a consumer (SUBSCRIBE, MESSAGEs, ACK in client-individual
mode), with heart-beats negotiated at CONNECT and sent now and then, DISCONNECT with a receipt
and FIN at the end. Frames are cut into 1460-byte segments (or `segment_bytes`); every write is
answered by a pure ACK from the peer. Packets are made by capture/tcp_synth.py and written by
capture/writer.py's rotating writer (the capture proxy's own), so the files are what
stomp-capture writes.

    from benchmarks.traffic import TrafficSpec, generate_files
    capture = generate_files(TrafficSpec(total_bytes=200_000_000), Path("work/bench/x"))
    capture.paths, capture.frames  # files, and frames by "direction COMMAND" for checks

A folder already holding the capture of the same spec (its manifest says so) is reused.
"""

from __future__ import annotations

import ipaddress
import json
import random
import shutil
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from capture.pcapng import enhanced_packet_block_parts
from capture.tcp_synth import SynthPacket, TcpConversation, endpoint
from capture.writer import CaptureRecord, CaptureWriter, RotationPolicy
from pipeline.net import Direction, Endpoint

MSS = 1460
BROKER = ("10.20.0.1", 61613)
START_NS = 1_736_935_200_000_000_000  # 2025-01-15T10:00:00Z
MANIFEST = "manifest.json"
DESTINATIONS = 24
# Traffic shapes: "broker", bodies of about 2 KB with a long tail; "small", the JSON events most
# applications send (50-400 B bodies, 8 headers a SEND or MESSAGE: about 3 M frames a GB).
SHAPES = ("broker", "small")
BODY_SIZES = {
    "broker": (120, 400, 900, 1_800, 4_000, 12_000, 48_000),  # a long tail, like real payloads
    "small": (50, 90, 140, 200, 260, 330, 400),
}
BODY_WEIGHTS = {"broker": (20, 30, 20, 12, 10, 6, 2), "small": (8, 14, 20, 22, 16, 12, 8)}
WRITER_BUFFER = 64 << 20


@dataclass(frozen=True, slots=True)
class TrafficSpec:
    total_bytes: int  # STOMP bytes (both directions) to generate; files are a little bigger
    connections: int = 400
    concurrent: int = 60
    files: int = 8
    heartbeat_ms: int = 10_000
    receipt_every: int = 5
    seed: int = 1
    segment_bytes: int = MSS  # 65483: the 64 KiB packets loopback GSO captures show
    shape: str = "broker"  # one of SHAPES


@dataclass(slots=True)
class GeneratedCapture:
    spec: TrafficSpec
    paths: list[Path]
    file_bytes: int
    stomp_bytes: int
    packets: int
    connections: int
    frames: dict[str, int] = field(default_factory=dict)  # "c2s SEND" -> count
    heartbeats: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict:
        out = asdict(self)
        out["paths"] = [str(p) for p in self.paths]
        return out


class _Body:
    """Text bodies cut from one pool, so making them costs nothing per byte."""

    def __init__(self, rng: random.Random, shape: str) -> None:
        self.sizes = BODY_SIZES[shape]
        self.weights = BODY_WEIGHTS[shape]
        letters = b"abcdefghijklmnopqrstuvwxyz"
        words = [bytes(rng.choice(letters) for _ in range(8)) for _ in range(64)]
        pool = b'{"event":"' + b'","'.join(rng.choice(words) for _ in range(20_000)) + b'"}'
        self.pool = memoryview(pool * 2)
        self.size = len(pool)
        self.rng = rng

    def make(self) -> bytes:
        length = self.rng.choices(self.sizes, self.weights)[0]
        start = self.rng.randrange(self.size - length)
        return bytes(self.pool[start : start + length])


@dataclass(slots=True)
class _Connection:
    index: int
    conv: TcpConversation
    producer: bool
    destination: str
    budget: int  # STOMP bytes (both ways) still to exchange before it says goodbye
    sent: int = 0  # messages sent or delivered
    unacked: list[str] = field(default_factory=list)
    heartbeats: bool = True


class _Generator:
    def __init__(self, spec: TrafficSpec, writer: CaptureWriter) -> None:
        self.spec = spec
        self.writer = writer
        self.rng = random.Random(spec.seed)
        self.body = _Body(self.rng, spec.shape)
        self.small = spec.shape == "small"
        self.now = START_NS
        self.frames: Counter[str] = Counter()
        self.heartbeats = 0
        self.stomp_bytes = 0
        self.packets = 0
        self.opened = 0

    # --- packets ------------------------------------------------------------------------------
    def _emit(self, packets: list[SynthPacket]) -> None:
        records = []
        for packet in packets:
            parts = enhanced_packet_block_parts(packet.ts_ns, packet.parts)
            records.append(CaptureRecord.of(parts, len(packet.payload)))
        size = sum(r.size for r in records)
        while not self.writer.has_room(size):  # wait for the disk rather than drop anything
            time.sleep(0.002)
        self.writer.offer(records, essential=True)
        self.packets += len(records)

    def _tick(self, mean_ns: int = 20_000) -> int:
        self.now += 1 + int(self.rng.expovariate(1 / mean_ns))
        return self.now

    def _write(self, conn: _Connection, direction: Direction, data: bytes) -> None:
        """One write: segments of up to segment_bytes, 12 us apart, then the peer's ACK."""
        ts = self._tick()
        packets = []
        size = self.spec.segment_bytes
        for start in range(0, len(data), size):
            packets += conn.conv.data(direction, ts, data[start : start + size])
            ts += 12_000
        self.now = ts
        packets.append(conn.conv.ack(direction.reverse, self._tick(40_000)))
        self._emit(packets)
        self.stomp_bytes += len(data)
        conn.budget -= len(data)

    def _frame(
        self,
        conn: _Connection,
        direction: Direction,
        command: str,
        headers: list[tuple[str, str]],
        body: bytes = b"",
    ) -> None:
        head = "".join(f"{k}:{v}\n" for k, v in headers)
        data = f"{command}\n{head}\n".encode() + body + b"\x00"
        if direction is Direction.S2C:
            data += b"\n"  # brokers end frames with NUL then LF
        self._write(conn, direction, data)
        self.frames[f"{direction} {command}"] += 1

    # --- a connection's life ------------------------------------------------------------------
    def open(self, index: int, budget: int) -> _Connection:
        client = ipaddress.IPv4Address("10.30.0.0") + 1 + index % 60_000
        conv = TcpConversation(
            Endpoint(str(client), 30_000 + index % 30_000),
            endpoint(*BROKER),
            client_isn=self.rng.getrandbits(32),
            server_isn=self.rng.getrandbits(32),
        )
        producer = index % 2 == 0
        destination = f"/queue/orders.{self.rng.randrange(DESTINATIONS)}"
        conn = _Connection(index, conv, producer, destination, budget)
        self._emit(conv.handshake(self._tick(), self._tick()))
        beat = self.spec.heartbeat_ms
        self._frame(
            conn,
            Direction.C2S,
            "CONNECT",
            [
                ("accept-version", "1.1,1.2"),
                ("host", "/"),
                ("login", f"app{index % 17}"),
                ("passcode", "secret"),
                ("heart-beat", f"{beat},{beat}"),
            ],
        )
        self._frame(
            conn,
            Direction.S2C,
            "CONNECTED",
            [
                ("version", "1.2"),
                ("session", f"ID:broker-{index}"),
                ("server", "ActiveMQ/5.17.2"),
                ("heart-beat", f"{beat},{beat}"),
            ],
        )
        if not producer:
            self._frame(
                conn,
                Direction.C2S,
                "SUBSCRIBE",
                [
                    ("id", "sub-0"),
                    ("destination", destination),
                    ("ack", "client-individual"),
                    ("receipt", f"sub-{index}"),
                ],
            )
            self._frame(conn, Direction.S2C, "RECEIPT", [("receipt-id", f"sub-{index}")])
        self.opened += 1
        return conn

    def step(self, conn: _Connection) -> None:
        if conn.heartbeats and self.rng.random() < 0.04:
            direction = self.rng.choice((Direction.C2S, Direction.S2C))
            self._emit(conn.conv.data(direction, self._tick(), b"\n"))
            self.stomp_bytes += 1
            self.heartbeats += 1
            conn.budget -= 1
            return
        conn.sent += 1
        body = self.body.make()
        if conn.producer:
            headers = [
                ("destination", conn.destination),
                ("content-type", "application/json"),
                ("content-length", str(len(body))),
                ("persistent", "true"),
            ]
            if self.small:
                headers += self._application_headers(conn)
            receipt = conn.sent % self.spec.receipt_every == 0
            if receipt:
                headers.append(("receipt", f"r-{conn.index}-{conn.sent}"))
            self._frame(conn, Direction.C2S, "SEND", headers, body)
            if receipt:
                self._frame(conn, Direction.S2C, "RECEIPT", [("receipt-id", headers[-1][1])])
            return
        message_id = f"ID:broker-{conn.index}-1:1:1:{conn.sent}"
        self._frame(
            conn,
            Direction.S2C,
            "MESSAGE",
            [
                ("subscription", "sub-0"),
                ("message-id", message_id),
                ("ack", message_id),
                ("destination", conn.destination),
                ("content-type", "application/json"),
                ("content-length", str(len(body))),
                *(self._application_headers(conn)[:2] if self.small else ()),
            ],
            body,
        )
        conn.unacked.append(message_id)
        if len(conn.unacked) >= self.rng.choice((1, 1, 2, 4)):
            for ack in conn.unacked:
                self._frame(conn, Direction.C2S, "ACK", [("id", ack)])
            conn.unacked.clear()

    def _application_headers(self, conn: _Connection) -> list[tuple[str, str]]:
        """What applications add to their messages: a correlation id, a tenant, an event type."""
        return [
            ("correlation-id", f"{conn.index:x}-{conn.sent:x}"),
            ("x-tenant", f"tenant-{conn.index % 11}"),
            ("x-event-type", ("order.created", "order.paid", "stock.moved")[conn.sent % 3]),
            ("priority", "4"),
        ]

    def close(self, conn: _Connection) -> None:
        for ack in conn.unacked:
            self._frame(conn, Direction.C2S, "ACK", [("id", ack)])
        receipt = f"bye-{conn.index}"
        self._frame(conn, Direction.C2S, "DISCONNECT", [("receipt", receipt)])
        self._frame(conn, Direction.S2C, "RECEIPT", [("receipt-id", receipt)])
        self._emit([conn.conv.fin(Direction.C2S, self._tick())])
        self._emit([conn.conv.fin(Direction.S2C, self._tick())])
        self._emit([conn.conv.ack(Direction.C2S, self._tick())])

    def run(self) -> None:
        spec = self.spec
        budget = max(1, spec.total_bytes // spec.connections)
        active: list[_Connection] = []
        while self.opened < spec.connections and len(active) < spec.concurrent:
            active.append(self.open(self.opened, self._budget(budget)))
        while active:
            slot = self.rng.randrange(len(active))
            conn = active[slot]
            self.step(conn)
            if conn.budget <= 0:
                self.close(conn)
                if self.opened < spec.connections:
                    active[slot] = self.open(self.opened, self._budget(budget))
                else:
                    active.pop(slot)

    def _budget(self, mean: int) -> int:
        return int(mean * self.rng.uniform(0.5, 1.5))


def _matches(folder: Path, spec: TrafficSpec) -> GeneratedCapture | None:
    manifest = folder / MANIFEST
    if not manifest.exists():
        return None
    saved = json.loads(manifest.read_text())
    if saved.get("spec") != asdict(spec):
        return None
    paths = [Path(p) for p in saved["paths"]]
    if (
        not all(p.exists() for p in paths)
        or sum(p.stat().st_size for p in paths) != saved["file_bytes"]
    ):
        return None
    saved["spec"] = spec
    saved["paths"] = paths
    return GeneratedCapture(**saved)


def generate_files(spec: TrafficSpec, folder: Path) -> GeneratedCapture:
    """The capture of `spec` in `folder` (reused when the folder already holds it)."""
    folder = Path(folder)
    found = _matches(folder, spec)
    if found is not None:
        return found
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    started = time.perf_counter()
    rotation = RotationPolicy(max_bytes=max(64 << 10, spec.total_bytes // spec.files + 1))
    writer = CaptureWriter(folder, rotation, buffer_bytes=WRITER_BUFFER, prefix="broker")
    writer.start()
    generator = _Generator(spec, writer)
    try:
        generator.run()
    finally:
        writer.close()
    paths = sorted(writer.files)
    capture = GeneratedCapture(
        spec,
        paths,
        sum(p.stat().st_size for p in paths),
        generator.stomp_bytes,
        generator.packets,
        generator.opened,
        dict(generator.frames),
        generator.heartbeats,
        round(time.perf_counter() - started, 1),
    )
    (folder / MANIFEST).write_text(json.dumps(capture.to_json(), indent=2) + "\n")
    return capture
