"""Build tests/data/malformed/: bad captures for `stomp-lake run`, deterministically.

    .venv/bin/python scripts/make_malformed_corpus.py [--out tests/data/malformed]

Most files are real sample captures (samples/*.pcap) edited at the byte level: cut short, a
record length corrupted, packets cut to a snapshot length, the link type changed, a SEND frame
rewritten (2 GB content-length, a 1 MB header line, invalid UTF-8, a frame that never ends).
Rewriting a TCP payload shifts the sequence numbers of the packets after it in that direction
and the acknowledgements of the other one, so the edited file is still a consistent stream.
Every file gets loopback addresses of its own (127.0.N.1 client, 127.0.N.2 broker), so its
connections never mix with the samples' when both are ingested together, and passcodes of its
own (`S3cret-NN-<sample passcode>`; the samples' passcodes equal their logins). The traffic that is
not STOMP (HTTP, TLS, random bytes on the broker port) is generated with
tests/support/pcapgen.py, with the same address scheme.

`expected.json` lists, per file, the anomalies a run must record: source, kind, and the byte
offset in the file of the record concerned (null where the offset is not fixed by the edit).
"""

from __future__ import annotations

import argparse
import json
import random
import struct
import sys
from dataclasses import dataclass, replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.support import pcapgen as g  # noqa: E402

SAMPLES = REPO / "samples"
DEFAULT_OUT = REPO / "tests" / "data" / "malformed"
BROKER_PORT = 61613
FILE_HEADER = 24
RECORD_HEADER = 16
ETH = 14
SEGMENT = 32 * 1024  # payloads longer than this after an edit are sent as several segments
LINKTYPE_USER0 = 147  # a private link type no reader decodes


@dataclass(slots=True)
class Record:
    sec: int
    frac: int
    orig: int
    data: bytes


@dataclass(slots=True)
class Capture:
    header: bytes
    order: str
    records: list[Record]

    @classmethod
    def read(cls, path: Path) -> Capture:
        raw = path.read_bytes()
        order = "<" if raw[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
        records, off = [], FILE_HEADER
        while off < len(raw):
            sec, frac, incl, orig = struct.unpack_from(order + "IIII", raw, off)
            start = off + RECORD_HEADER
            records.append(Record(sec, frac, orig, raw[start : start + incl]))
            off = start + incl
        return cls(raw[:FILE_HEADER], order, records)

    def offsets(self) -> list[int]:
        """File offset of each record."""
        out, off = [], FILE_HEADER
        for record in self.records:
            out.append(off)
            off += RECORD_HEADER + len(record.data)
        return out

    def to_bytes(self) -> bytes:
        parts = [self.header]
        for r in self.records:
            parts.append(struct.pack(self.order + "IIII", r.sec, r.frac, len(r.data), r.orig))
            parts.append(r.data)
        return b"".join(parts)


# -- Ethernet / IPv4 / TCP of the loopback samples ----------------------------------------------


@dataclass(slots=True)
class Tcp:
    eth: bytes
    ip_header: bytes
    src: bytes
    dst: bytes
    sport: int
    dport: int
    seq: int
    ack: int
    tcp_header: bytes  # with options; seq, ack and checksum are rewritten on build
    payload: bytes


def parse(data: bytes) -> Tcp | None:
    if len(data) < ETH + 20 or data[12:14] != b"\x08\x00" or data[ETH + 9] != 6:
        return None
    ihl = (data[ETH] & 0x0F) * 4
    total = struct.unpack_from("!H", data, ETH + 2)[0]
    tcp = ETH + ihl
    doff = (data[tcp + 12] >> 4) * 4
    sport, dport, seq, ack = struct.unpack_from("!HHII", data, tcp)
    return Tcp(
        data[:ETH],
        data[ETH:tcp],
        data[ETH + 12 : ETH + 16],
        data[ETH + 16 : ETH + 20],
        sport,
        dport,
        seq,
        ack,
        data[tcp : tcp + doff],
        data[tcp + doff : ETH + total],
    )


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\x00"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def build(packet: Tcp) -> bytes:
    tcp = bytearray(packet.tcp_header)
    struct.pack_into("!HHII", tcp, 0, packet.sport, packet.dport, packet.seq, packet.ack)
    tcp[16:18] = b"\x00\x00"
    segment = bytes(tcp) + packet.payload
    pseudo = packet.src + packet.dst + struct.pack("!BBH", 0, 6, len(segment))
    struct.pack_into("!H", tcp, 16, _checksum(pseudo + segment))
    ip = bytearray(packet.ip_header)
    struct.pack_into("!H", ip, 2, len(ip) + len(segment))
    ip[12:20] = packet.src + packet.dst
    ip[10:12] = b"\x00\x00"
    struct.pack_into("!H", ip, 10, _checksum(bytes(ip)))
    return packet.eth + bytes(ip) + bytes(tcp) + packet.payload


def readdress(capture: Capture, net: int) -> None:
    """Client 127.0.net.1, broker 127.0.net.2 (by the broker port)."""
    client, broker = bytes([127, 0, net, 1]), bytes([127, 0, net, 2])
    for record in capture.records:
        packet = parse(record.data)
        if packet is None:
            continue
        from_broker = packet.sport == BROKER_PORT
        packet.src, packet.dst = (broker, client) if from_broker else (client, broker)
        record.data = build(packet)
        record.orig = len(record.data)


def rewrite_payload(capture: Capture, index: int, payload: bytes) -> None:
    """Give record `index` a new payload (split into several segments when long) and shift the
    sequence numbers after it in that direction, and the acknowledgements of the other one."""
    packet = parse(capture.records[index].data)
    assert packet is not None
    delta = len(payload) - len(packet.payload)
    here = (packet.sport, packet.dport)
    record = capture.records[index]
    pieces = []
    for start in range(0, max(len(payload), 1), SEGMENT):
        piece = replace(packet, seq=(packet.seq + start) & 0xFFFFFFFF)
        piece.payload = payload[start : start + SEGMENT]
        data = build(piece)
        pieces.append(Record(record.sec, record.frac, len(data), data))
    for later in capture.records[index + 1 :]:
        other = parse(later.data)
        if other is None:
            continue
        if (other.sport, other.dport) == here:
            other.seq = (other.seq + delta) & 0xFFFFFFFF
        elif (other.dport, other.sport) == here and other.tcp_header[13] & 0x10:
            other.ack = (other.ack + delta) & 0xFFFFFFFF
        else:
            continue
        later.data = build(other)
        later.orig = len(later.data)
    capture.records[index : index + 1] = pieces


def find_payload(capture: Capture, prefix: bytes, nth: int = 0) -> int:
    """Index of the nth record whose TCP payload starts with prefix."""
    for index, record in enumerate(capture.records):
        packet = parse(record.data)
        if packet is not None and packet.payload.startswith(prefix):
            if nth == 0:
                return index
            nth -= 1
    raise LookupError(f"no payload starting with {prefix!r}")


def payload_of(capture: Capture, index: int) -> bytes:
    packet = parse(capture.records[index].data)
    assert packet is not None
    return packet.payload


# -- the files ----------------------------------------------------------------------------------

Expected = list[dict[str, object]]


def sample(name: str, net: int) -> Capture:
    capture = Capture.read(SAMPLES / name)
    readdress(capture, net)
    distinct_passcodes(capture, net)
    return capture


def distinct_passcodes(capture: Capture, net: int) -> None:
    """The samples' passcodes equal their logins (admin/admin, guest/guest), which tables show;
    a passcode of its own per file lets a test look for it in every table and log line."""
    for index in range(len(capture.records)):
        packet = parse(capture.records[index].data)
        if packet is None or not packet.payload.startswith((b"CONNECT\n", b"STOMP\n")):
            continue
        head, found, rest = packet.payload.partition(b"\npasscode:")
        if found and not rest.startswith(b"wrong-passcode"):
            rewrite_payload(capture, index, head + found + b"S3cret-%02d-" % net + rest)


def truncated() -> tuple[bytes, Expected]:
    capture = sample("activemq-queues-acks.pcap", 1)
    index = len(capture.records) * 3 // 5
    at = capture.offsets()[index]
    data = capture.to_bytes()[: at + RECORD_HEADER + 40]  # inside the record's packet
    return data, [{"source": "capture", "kind": "truncated_file", "file_offset": at}]


def corrupt_record_length() -> tuple[bytes, Expected]:
    capture = sample("rabbitmq-heartbeat-errors.pcap", 2)
    index = find_payload(capture, b"SEND\n", 3)
    at = capture.offsets()[index]
    data = bytearray(capture.to_bytes())
    struct.pack_into(capture.order + "I", data, at + 8, 0x7FFFFFF0)  # incl_len
    return bytes(data), [
        {"source": "capture", "kind": "bad_record_length", "file_offset": at},
        {"source": "tcp", "kind": "gap", "file_offset": None},
    ]


def snaplen_cut() -> tuple[bytes, Expected]:
    capture = sample("activemq-heartbeat-v10.pcap", 3)
    snaplen = 96
    capture.header = (
        capture.header[:16] + struct.pack(capture.order + "I", snaplen) + (capture.header[20:])
    )
    first_cut = None
    for at, record in zip(capture.offsets(), capture.records, strict=True):
        if len(record.data) > snaplen:
            first_cut = at if first_cut is None else first_cut
        record.data = record.data[:snaplen]
    return capture.to_bytes(), [
        {"source": "capture", "kind": "snaplen_cut", "file_offset": first_cut},
        {"source": "tcp", "kind": "gap", "file_offset": None},
    ]


def unknown_linktype() -> tuple[bytes, Expected]:
    capture = sample("activemq-heartbeat-v10.pcap", 4)
    capture.header = capture.header[:20] + struct.pack(capture.order + "I", LINKTYPE_USER0)
    return capture.to_bytes(), [
        {"source": "capture", "kind": "unknown_linktype", "file_offset": 20}
    ]


def _edit_send(name: str, net: int, edit, kind: str, nth: int = 0) -> tuple[bytes, Expected]:
    capture = sample(name, net)
    index = find_payload(capture, b"SEND\n", nth)
    rewrite_payload(capture, index, edit(payload_of(capture, index)))
    at = capture.offsets()[index]
    return capture.to_bytes(), [{"source": "stomp", "kind": kind, "file_offset": at}]


def content_length_2gb() -> tuple[bytes, Expected]:
    def edit(payload: bytes) -> bytes:
        head, _, rest = payload.partition(b"content-length:")
        return head + b"content-length:2147483648" + rest[rest.index(b"\n") :]

    return _edit_send("activemq-queues-acks.pcap", 5, edit, "body_too_large", 1)


def header_line_1mb() -> tuple[bytes, Expected]:
    def edit(payload: bytes) -> bytes:
        command, _, rest = payload.partition(b"\n")
        return command + b"\nx-padding:" + b"p" * (1 << 20) + b"\n" + rest

    return _edit_send("activemq-heartbeat-v10.pcap", 6, edit, "header_line_too_long", 4)


def invalid_utf8() -> tuple[bytes, Expected]:
    def edit(payload: bytes) -> bytes:
        return payload.replace(b"destination:/queue/jobs", b"destination:/queue/j\xff\xfe\xc0", 1)

    return _edit_send("rabbitmq-heartbeat-errors.pcap", 7, edit, "invalid_utf8", 5)


def frame_never_ends() -> tuple[bytes, Expected]:
    """The producer's DISCONNECT becomes a SEND with no content-length whose body runs on
    without a NUL until the connection closes."""
    capture = sample("activemq-queues-acks.pcap", 8)
    producer = find_payload(capture, b"SEND\n")
    port = parse(capture.records[producer].data).sport  # type: ignore[union-attr]
    index = next(
        i
        for i, record in enumerate(capture.records)
        if (p := parse(record.data)) is not None
        and p.sport == port
        and p.payload.startswith(b"DISCONNECT")
    )
    body = b"".join(b"line %05d of a body that never ends\n" % n for n in range(400))
    rewrite_payload(capture, index, b"SEND\ndestination:/queue/orders\n\n" + body)
    at = capture.offsets()[index]
    return capture.to_bytes(), [{"source": "stomp", "kind": "truncated_frame", "file_offset": at}]


def _not_stomp(net: int, client_bytes: bytes, server_bytes: bytes) -> bytes:
    chunks = [g.Chunk(True, client_bytes)]
    if server_bytes:
        chunks.append(g.Chunk(False, server_bytes, gap_ns=2_000_000))
    conv = g.Conversation(
        client=(f"127.0.{net}.1", 50000 + net),
        server=(f"127.0.{net}.2", BROKER_PORT),
        chunks=chunks,
        start_ns=1_763_700_000_000_000_000 + net * 1_000_000_000,
    )
    return g.pcap_bytes(g.generate([conv]).packets)


def http_on_broker_port() -> tuple[bytes, Expected]:
    request = (
        b"GET /admin/ HTTP/1.1\r\nHost: 127.0.9.2:61613\r\nUser-Agent: curl/7.88.1\r\n"
        b"Accept: */*\r\n\r\n"
    )
    return _not_stomp(9, request, b""), [
        {"source": "stomp", "kind": "truncated_frame", "file_offset": None}
    ]


def tls_client_hello() -> bytes:
    """A TLS 1.2 ClientHello record with a fixed random (a client speaking TLS to the plain
    STOMP port)."""
    ciphers = struct.pack("!7H", 0xC02F, 0xC030, 0xC02B, 0xC02C, 0x009E, 0x009F, 0x00FF)
    sni_name = b"broker.example"
    sni = struct.pack("!HBH", len(sni_name) + 3, 0, len(sni_name)) + sni_name
    extensions = struct.pack("!HH", 0, len(sni)) + sni
    groups = struct.pack("!H3H", 6, 0x001D, 0x0017, 0x0018)
    extensions += struct.pack("!HH", 10, len(groups)) + groups
    body = (
        b"\x03\x03"
        + bytes(range(0x20, 0x40))  # client random
        + b"\x00"  # no session id
        + struct.pack("!H", len(ciphers))
        + ciphers
        + b"\x01\x00"  # null compression
        + struct.pack("!H", len(extensions))
        + extensions
    )
    handshake = b"\x01" + len(body).to_bytes(3, "big") + body
    return b"\x16\x03\x01" + struct.pack("!H", len(handshake)) + handshake


def tls_on_broker_port() -> tuple[bytes, Expected]:
    return _not_stomp(10, tls_client_hello(), b""), [
        {"source": "tls", "kind": "tls_no_keys", "file_offset": None}
    ]


def random_on_broker_port() -> tuple[bytes, Expected]:
    rng = random.Random(11)
    return _not_stomp(11, rng.randbytes(3000), rng.randbytes(1500)), [
        {"source": "stomp", "kind": "unknown_command", "file_offset": None}
    ]


WEB_PORT = 15674  # RabbitMQ Web-STOMP's port; detection does not depend on it
WS_KEY = "dGhlIHNhbXBsZSBub25jZQ=="
WS_ACCEPT = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


def _upgrade(net: int, extensions: str = "") -> tuple[bytes, bytes]:
    request = (
        f"GET /ws HTTP/1.1\r\nHost: 127.0.{net}.2:{WEB_PORT}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {WS_KEY}\r\nSec-WebSocket-Version: 13\r\n"
        "Sec-WebSocket-Protocol: v12.stomp, v11.stomp, v10.stomp\r\n"
        "Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n"
    ).encode()
    response = (
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Accept: {WS_ACCEPT}\r\nSec-WebSocket-Protocol: v12.stomp\r\n"
        f"{extensions}\r\n"
    ).encode()
    return request, response


def _ws_frame(
    opcode: int, payload: bytes, *, mask: bytes | None, fin: bool = True, rsv: int = 0
) -> bytes:
    size = len(payload)
    head = bytes([(0x80 if fin else 0) | rsv | opcode])
    flag = 0x80 if mask is not None else 0
    if size < 126:
        head += bytes([flag | size])
    elif size < 65536:
        head += bytes([flag | 126]) + struct.pack("!H", size)
    else:
        head += bytes([flag | 127]) + struct.pack("!Q", size)
    if mask is not None:
        head += mask
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return head + payload


def _websocket(net: int, chunks: list[tuple[bool, bytes]]) -> bytes:
    conv = g.Conversation(
        client=(f"127.0.{net}.1", 50000 + net),
        server=(f"127.0.{net}.2", WEB_PORT),
        chunks=[g.Chunk(c, data, gap_ns=2_000_000) for c, data in chunks],
        start_ns=1_763_700_000_000_000_000 + net * 1_000_000_000,
    )
    return g.pcap_bytes(g.generate([conv]).packets)


_MASK = b"\x12\x34\x56\x78"
_CONNECTED = b"CONNECTED\nversion:1.2\nheart-beat:0,0\n\n\x00\n"


def _connect(net: int) -> bytes:
    headers = f"accept-version:1.2\nhost:/\nlogin:guest\npasscode:S3cret-{net:02d}-guest"
    return f"CONNECT\n{headers}\n\n\x00".encode()


def websocket_unmasked_client() -> tuple[bytes, Expected]:
    """A client that sends its frames unmasked (and a server that masks its own)."""
    request, response = _upgrade(12)
    chunks = [
        (True, request),
        (False, response),
        (True, _ws_frame(1, _connect(12), mask=None)),
        (False, _ws_frame(1, _CONNECTED, mask=_MASK)),
        (True, _ws_frame(1, b"DISCONNECT\n\n\x00", mask=None)),
    ]
    return _websocket(12, chunks), [
        {"source": "websocket", "kind": "websocket_unmasked_client_frame", "file_offset": None},
        {"source": "websocket", "kind": "websocket_masked_server_frame", "file_offset": None},
    ]


def websocket_bad_frames() -> tuple[bytes, Expected]:
    """A reserved opcode, a ping over 125 bytes, RSV2, a close with code 1005 (local only)."""
    request, response = _upgrade(13)
    chunks = [
        (True, request),
        (False, response),
        (True, _ws_frame(1, _connect(13), mask=_MASK)),
        (False, _ws_frame(1, _CONNECTED, mask=None)),
        (True, _ws_frame(3, b"reserved", mask=_MASK)),
        (True, _ws_frame(9, b"p" * 200, mask=_MASK)),
        (True, _ws_frame(1, b"\n", mask=_MASK, rsv=0x20)),
        (False, _ws_frame(8, struct.pack("!H", 1005) + b"bye", mask=None)),
    ]
    return _websocket(13, chunks), [
        {"source": "websocket", "kind": "websocket_bad_opcode", "file_offset": None},
        {"source": "websocket", "kind": "websocket_bad_control_frame", "file_offset": None},
        {"source": "websocket", "kind": "websocket_reserved_bits", "file_offset": None},
        {"source": "websocket", "kind": "websocket_invalid_close", "file_offset": None},
    ]


def websocket_inflate_garbage() -> tuple[bytes, Expected]:
    """permessage-deflate agreed, then a 'compressed' message that is not DEFLATE data."""
    request, response = _upgrade(14, "Sec-WebSocket-Extensions: permessage-deflate\r\n")
    chunks = [
        (True, request),
        (False, response),
        (True, _ws_frame(1, b"\xff\xff\xff\xff\xff", mask=_MASK, rsv=0x40)),
    ]
    return _websocket(14, chunks), [
        {"source": "websocket", "kind": "websocket_inflate_failed", "file_offset": None}
    ]


def websocket_refused() -> tuple[bytes, Expected]:
    """The upgrade answered 403: recorded, nothing decoded as STOMP."""
    request, _ = _upgrade(15)
    refusal = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 9\r\n\r\nForbidden"
    return _websocket(15, [(True, request), (False, refusal)]), [
        {"source": "websocket", "kind": "websocket_upgrade_refused", "file_offset": None}
    ]


FILES = {
    "truncated.pcap": truncated,
    "corrupt-record-length.pcap": corrupt_record_length,
    "snaplen-cut.pcap": snaplen_cut,
    "unknown-linktype.pcap": unknown_linktype,
    "http-on-broker-port.pcap": http_on_broker_port,
    "tls-on-broker-port.pcap": tls_on_broker_port,
    "random-on-broker-port.pcap": random_on_broker_port,
    "content-length-2gb.pcap": content_length_2gb,
    "header-line-1mb.pcap": header_line_1mb,
    "invalid-utf8.pcap": invalid_utf8,
    "frame-never-ends.pcap": frame_never_ends,
    "websocket-unmasked-client.pcap": websocket_unmasked_client,
    "websocket-bad-frames.pcap": websocket_bad_frames,
    "websocket-inflate-garbage.pcap": websocket_inflate_garbage,
    "websocket-refused.pcap": websocket_refused,
}


def make(out: Path) -> dict[str, Expected]:
    out.mkdir(parents=True, exist_ok=True)
    expected = {}
    for name, maker in FILES.items():
        data, anomalies = maker()
        (out / name).write_bytes(data)
        expected[name] = anomalies
    (out / "expected.json").write_text(json.dumps(expected, indent=2, sort_keys=True) + "\n")
    return expected


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    for name in make(args.out):
        print(f"{args.out / name}: {(args.out / name).stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
