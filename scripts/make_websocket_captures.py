"""Real STOMP-over-WebSocket captures: RabbitMQ 3.10 with rabbitmq_web_stomp (Debian package),
real clients, tcpdump on loopback. Each capture comes with the clients' own record of what they
sent and received (JSON), which the tests check the tables against.

    sudo .venv/bin/python scripts/make_websocket_captures.py --out DIR [--only NAME ...]

Captures (DIR/<name>.pcap + DIR/<name>.record.json):
  web-stomp        stomp.py WSStompConnection (1.2, heart-beats, client-individual ACK/NACK,
                   receipts); @stomp/stompjs on Node `ws` with permessage-deflate and without
                   (binary body, receipts, heart-beats, ACK/NACK); a wsproto client that
                   fragments its frames with a ping between the fragments; a refused upgrade
                   (wrong path -> 404)
  web-mqtt         an upgrade to rabbitmq_web_mqtt choosing the `mqtt` subprotocol (not STOMP)
  back-pressure    plain STOMP over TCP, heart-beat:0,0, a consumer with a 2 KiB receive buffer
                   reading slowly while a producer floods its queue (trailing LFs split from
                   their NUL by flow control)
  web-stomp-chromium
                   @stomp/stompjs (the UMD bundle of the local npm install) in Debian's headless
                   Chromium, on a page served on localhost, over the browser's own WebSocket
                   (permessage-deflate as Chromium offers it), driven through chromedriver
  web-stomp-proxy  the clients of web-stomp (stomp.py WSStompConnection, stompjs with and without
                   permessage-deflate) through `stomp-capture` in front of web-stomp: the
                   proxy's own pcapng (DIR/rabbitmq-web-stomp-proxy.pcapng), no tcpdump
  nul-lf-split     the same under an 88-byte MSS with body sizes varying 1..97 bytes, repeated
                   (at most --attempts captures) until a broker segment ends in a frame's NUL
                   and the next one starts with its LF

Needs root (tcpdump, RabbitMQ), Node with @stomp/stompjs and ws installed under work/wsnode
(`npm install @stomp/stompjs ws`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import http.server
import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import stomp  # noqa: E402
from tcpdump_capture import tcpdump  # noqa: E402
from wsproto import ConnectionType, WSConnection  # noqa: E402
from wsproto.events import (  # noqa: E402
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)

from tests.support import brokers  # noqa: E402

NODE_DIR = ROOT / "work" / "wsnode"
WEB_CONF = """\
listeners.tcp = none
stomp.listeners.tcp.1 = 127.0.0.1:{stomp}
web_stomp.tcp.port = {web}
web_stomp.tcp.ip = 127.0.0.1
web_stomp.ws_opts.compress = true
mqtt.listeners.tcp = none
web_mqtt.tcp.port = {mqtt}
web_mqtt.tcp.ip = 127.0.0.1
"""


@dataclass(frozen=True, slots=True)
class WebBroker:
    stomp_port: int
    web_port: int
    mqtt_port: int
    login: str = "guest"
    passcode: str = "guest"


@contextlib.contextmanager
def rabbitmq_web(workdir: Path) -> Iterator[WebBroker]:
    """RabbitMQ with rabbitmq_stomp, rabbitmq_web_stomp (compression allowed) and web MQTT."""
    ports = WebBroker(brokers.free_port(), brokers.free_port(), brokers.free_port())
    broker = brokers.Broker("rabbitmq", "127.0.0.1", ports.stomp_port, "guest", "guest", "/")
    launch = brokers._rabbitmq_launch(broker, workdir)
    (workdir / "rabbitmq.conf").write_text(
        WEB_CONF.format(stomp=ports.stomp_port, web=ports.web_port, mqtt=ports.mqtt_port)
    )
    (workdir / "enabled_plugins").write_text(
        "[rabbitmq_stomp,rabbitmq_web_stomp,rabbitmq_mqtt,rabbitmq_web_mqtt].\n"
    )
    with launch.log.open("wb") as log:
        process = subprocess.Popen(
            launch.argv,
            cwd=workdir,
            env=launch.env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        brokers._wait_ready(broker, process, launch.log)
        _wait_port(ports.web_port)
        yield ports
    finally:
        brokers._stop(process)


def _wait_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.2)
    raise RuntimeError(f"nothing listens on {port}")


# ---- clients ---------------------------------------------------------------------------------


class _Recorder(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.sent: Counter[str] = Counter()
        self.received: Counter[str] = Counter()
        self.heart_beats_sent = 0
        self.heart_beats_received = 0
        self.message_ids: list[str] = []
        self.receipts: list[str] = []
        self.messages = threading.Semaphore(0)
        self.ack_ids: list[str] = []

    def on_send(self, frame: Any) -> None:
        if frame.cmd == "heartbeat" or frame.cmd is None:
            self.heart_beats_sent += 1
        else:
            self.sent[frame.cmd] += 1

    def on_heartbeat(self) -> None:
        self.heart_beats_received += 1

    def on_connected(self, frame: Any) -> None:
        self.received["CONNECTED"] += 1

    def on_message(self, frame: Any) -> None:
        self.received["MESSAGE"] += 1
        self.message_ids.append(frame.headers["message-id"])
        self.ack_ids.append(frame.headers.get("ack", frame.headers["message-id"]))
        self.messages.release()

    def on_receipt(self, frame: Any) -> None:
        self.received["RECEIPT"] += 1
        self.receipts.append(frame.headers["receipt-id"])

    def on_error(self, frame: Any) -> None:
        self.received["ERROR"] += 1

    def record(self, client: str) -> dict[str, Any]:
        return {
            "client": client,
            "sent": dict(self.sent),
            "received": dict(self.received),
            "heart_beats_sent": self.heart_beats_sent,
            "heart_beats_received": self.heart_beats_received,
            "message_ids": self.message_ids,
            "receipts": self.receipts,
        }


def stomppy_ws(broker: WebBroker) -> dict[str, Any]:
    queue = f"/queue/ws-stomppy-{uuid.uuid4().hex[:6]}"
    conn = stomp.WSStompConnection(
        [("127.0.0.1", broker.web_port)], ws_path="/ws", heartbeats=(500, 500), vhost="/"
    )
    recorder = _Recorder()
    conn.set_listener("record", recorder)
    conn.connect(broker.login, broker.passcode, wait=True)
    conn.subscribe(queue, id="1", ack="client-individual", receipt="sub-1")
    for n in range(5):
        conn.send(queue, json.dumps({"n": n}), receipt=f"send-{n}")
    for _ in range(5):
        recorder.messages.acquire(timeout=10)
    acked, nacked = recorder.ack_ids[:4], recorder.ack_ids[4:5]
    for ack_id in acked:
        conn.ack(ack_id)
    for ack_id in nacked:
        conn.nack(ack_id, requeue=False)
    time.sleep(1.8)  # heart-beats both ways
    conn.disconnect(receipt="bye")
    record = recorder.record("stomp.py WSStompConnection")
    record.update(acked=acked, nacked=nacked, destination=queue)
    return record


def stompjs(broker: WebBroker, deflate: bool) -> dict[str, Any]:
    queue = f"/queue/ws-stompjs-{uuid.uuid4().hex[:6]}"
    url = f"ws://127.0.0.1:{broker.web_port}/ws"
    argv = ["node", str(ROOT / "scripts" / "websocket_stompjs_client.mjs"), url, broker.login]
    argv += [broker.passcode, queue, "1" if deflate else "0"]
    script = NODE_DIR / "client.mjs"  # ESM resolves packages next to the script
    script.write_text((ROOT / "scripts" / "websocket_stompjs_client.mjs").read_text())
    argv[1] = str(script)
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout
    record = json.loads(out.strip().splitlines()[-1])
    record.update(destination=queue, permessage_deflate=deflate)
    return record


PAGE = ROOT / "scripts" / "websocket_stompjs_page.html"
STOMPJS_BUNDLE = NODE_DIR / "node_modules" / "@stomp" / "stompjs" / "bundles" / "stomp.umd.js"


@contextlib.contextmanager
def _served(folder: Path) -> Iterator[int]:
    """A static HTTP server for `folder` on a free localhost port, in a thread."""
    handler = functools.partial(QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
        pass


def stompjs_chromium(broker: WebBroker, timeout: float = 30.0) -> dict[str, Any]:
    """stompjs on a localhost page in headless Chromium; the page's own record."""
    from tests.pipeline.report.headless_chromium import find_browser, headless_chromium

    found = find_browser()
    if found is None:
        raise RuntimeError("chromium and chromedriver are needed (Debian 'chromium-driver')")
    queue = f"/queue/ws-chromium-{uuid.uuid4().hex[:6]}"
    with tempfile.TemporaryDirectory(prefix="stomp-lake-page-") as tmp:
        folder = Path(tmp)
        shutil.copyfile(PAGE, folder / "index.html")
        shutil.copyfile(STOMPJS_BUNDLE, folder / "stomp.umd.js")
        with _served(folder) as http_port, headless_chromium(*found, folder / "driver.log") as b:
            query = urllib.parse.urlencode(
                {
                    "ws": f"ws://127.0.0.1:{broker.web_port}/ws",
                    "login": broker.login,
                    "passcode": broker.passcode,
                    "destination": queue,
                }
            )
            b.open(f"http://localhost:{http_port}/index.html?{query}")
            deadline = time.monotonic() + timeout
            done = "return window.stompRecord && window.stompRecord.done"
            while not b.script(done):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the page never finished: {b.console()}")
                time.sleep(0.2)
            record: dict[str, Any] = b.script("return window.stompRecord")
    record.pop("done", None)
    record.update(destination=queue, page_origin=f"http://localhost:{http_port}")
    return record


def _ws_client(port: int, path: str, subprotocols: list[str]) -> tuple[socket.socket, WSConnection]:
    sock = socket.create_connection(("127.0.0.1", port))
    ws = WSConnection(ConnectionType.CLIENT)
    request = Request(host=f"127.0.0.1:{port}", target=path, subprotocols=subprotocols)
    sock.sendall(ws.send(request))
    return sock, ws


def _events(sock: socket.socket, ws: WSConnection, timeout: float = 5.0) -> list[Any]:
    sock.settimeout(timeout)
    data = sock.recv(65536)
    ws.receive_data(data or None)
    return list(ws.events())


def fragmenting_client(broker: WebBroker) -> dict[str, Any]:
    """wsproto sending each STOMP frame in 3 fragments, a ping between the first two."""
    sock, ws = _ws_client(broker.web_port, "/ws", ["v12.stomp"])
    events = _events(sock, ws)
    assert any(isinstance(e, AcceptConnection) for e in events), events
    record: dict[str, Any] = {"client": "wsproto fragmenting"}
    record.update(sent=Counter(), received=Counter())
    queue = f"/queue/ws-frag-{uuid.uuid4().hex[:6]}"
    frames = [
        f"CONNECT\naccept-version:1.2\nhost:/\nlogin:{broker.login}\npasscode:{broker.passcode}\n\n\0",
        f"SUBSCRIBE\nid:0\ndestination:{queue}\nack:auto\n\n\0",
        f"SEND\ndestination:{queue}\ncontent-type:text/plain\nreceipt:r-frag\n\n{'y' * 2000}\0",
        "DISCONNECT\nreceipt:bye\n\n\0",
    ]
    received = ""
    for frame in frames:
        third = len(frame) // 3
        parts = [frame[:third], frame[third : 2 * third], frame[2 * third :]]
        sock.sendall(ws.send(TextMessage(data=parts[0], message_finished=False)))
        sock.sendall(ws.send(Ping(payload=b"frag")))
        sock.sendall(ws.send(TextMessage(data=parts[1], message_finished=False)))
        sock.sendall(ws.send(TextMessage(data=parts[2], message_finished=True)))
        record["sent"][frame.split("\n", 1)[0]] += 1
        time.sleep(0.3)
        with contextlib.suppress(TimeoutError):
            for event in _events(sock, ws, 1.0):
                if isinstance(event, TextMessage):
                    received += event.data
    for chunk in received.split("\0"):
        command = chunk.lstrip("\r\n").split("\n", 1)[0]
        if command:
            record["received"][command] += 1
    with contextlib.suppress(Exception):
        sock.sendall(ws.send(CloseConnection(code=1000, reason="done")))
        _events(sock, ws, 2.0)
    sock.close()
    record["sent"], record["received"] = dict(record["sent"]), dict(record["received"])
    record.update(destination=queue, pings_sent=len(frames))
    return record


def refused_upgrade(broker: WebBroker) -> dict[str, Any]:
    sock, ws = _ws_client(broker.web_port, "/nope", ["v12.stomp"])
    status = None
    with contextlib.suppress(TimeoutError):
        for event in _events(sock, ws):
            if isinstance(event, RejectConnection):
                status = event.status_code
            elif isinstance(event, RejectData):
                pass
    sock.close()
    return {"client": "wsproto refused", "path": "/nope", "status": status}


def mqtt_upgrade(broker: WebBroker) -> dict[str, Any]:
    sock, ws = _ws_client(broker.mqtt_port, "/ws", ["mqtt"])
    events = _events(sock, ws)
    accepted = [e for e in events if isinstance(e, AcceptConnection)]
    chosen = accepted[0].subprotocol if accepted else None
    # MQTT 3.1.1 CONNECT: client id "sl", clean session, keep-alive 10 s, guest/guest
    payload = b"\x00\x02sl" + b"\x00\x05guest" + b"\x00\x05guest"
    variable = b"\x00\x04MQTT\x04\xc2\x00\x0a"
    packet = bytes([0x10, len(variable) + len(payload)]) + variable + payload
    sock.sendall(ws.send(BytesMessage(data=packet)))
    connack = b""
    with contextlib.suppress(TimeoutError):
        for event in _events(sock, ws):
            if isinstance(event, BytesMessage):
                connack += bytes(event.data)
    with contextlib.suppress(Exception):
        sock.sendall(ws.send(CloseConnection(code=1000)))
        _events(sock, ws, 2.0)
    sock.close()
    return {"client": "wsproto mqtt", "subprotocol": chosen, "connack": connack.hex()}


def slow_consumer(
    broker: WebBroker, queue: str, bodies: list[str], mss: int, read_bytes: int, pause_s: float
) -> bytes:
    """A raw-socket STOMP 1.2 consumer (`heart-beat:0,0`, auto ack) with a 2 KiB receive
    buffer and the given TCP_MAXSEG, reading `read_bytes` every `pause_s` while stomp.py sends
    `bodies` to `queue`; the bytes it received, DISCONNECT's receipt included."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, mss)
    sock.connect(("127.0.0.1", broker.stomp_port))
    hello = "CONNECT\naccept-version:1.2\nhost:/\nlogin:guest\npasscode:guest\nheart-beat:0,0\n\n\0"
    sock.sendall(hello.encode())
    sock.sendall(f"SUBSCRIBE\nid:0\ndestination:{queue}\nack:auto\n\n\0".encode())
    producer = stomp.Connection12([("127.0.0.1", broker.stomp_port)], vhost="/")
    producer.connect("guest", "guest", wait=True)
    for body in bodies:
        producer.send(queue, body)
    stream = b""
    deadline = time.monotonic() + 120
    sock.settimeout(2)
    while stream.count(b"MESSAGE\n") < len(bodies) and time.monotonic() < deadline:
        with contextlib.suppress(TimeoutError):
            stream += sock.recv(read_bytes)
        time.sleep(pause_s)
    sock.sendall(b"DISCONNECT\nreceipt:bye\n\n\0")
    with contextlib.suppress(TimeoutError):
        stream += sock.recv(4096)
    sock.close()
    producer.disconnect()
    return stream


def back_pressure(broker: WebBroker, messages: int = 300, size: int = 8) -> dict[str, Any]:
    """A slow consumer with a 2 KiB receive buffer and a 100-byte MSS (so that the broker's
    segments, sent as the window opens, often end between a NUL and its LF); its own parse is
    the record."""
    queue = f"/queue/slow-{uuid.uuid4().hex[:6]}"
    bodies = [f"{n:06d}" + "z" * size for n in range(messages)]
    stream = slow_consumer(broker, queue, bodies, mss=100, read_bytes=256, pause_s=0.003)
    return {
        "client": "raw socket, SO_RCVBUF 2048, TCP_MAXSEG 100, 256-byte reads every 3 ms",
        "destination": queue,
        "messages_received": stream.count(b"MESSAGE\n"),
        "heart_beat": "0,0",
        "s2c_bytes_received": len(stream),
        "frames_received_nul_lf": stream.count(b"\0\n"),
    }


def nul_lf_split(broker: WebBroker, messages: int = 450) -> dict[str, Any]:
    """A slow consumer whose 88-byte TCP_MAXSEG (Linux's smallest) is announced as the broker's
    MSS: under a full window the broker sends whole MSS multiples, so a segment ends between a
    NUL and its LF when a multiple falls there; body sizes 1..97 spread the frame ends over
    every residue. Its own parse is the record."""
    queue = f"/queue/split-{uuid.uuid4().hex[:4]}"
    bodies = ["b" * (1 + n % 97) for n in range(messages)]
    stream = slow_consumer(broker, queue, bodies, 88, READ_BYTES, READ_PAUSE_S)
    return {
        "client": f"raw socket, SO_RCVBUF 2048, TCP_MAXSEG 88, {READ_BYTES}-byte reads every "
        f"{READ_PAUSE_S * 1000:g} ms",
        "destination": queue,
        "messages_sent": messages,
        "body_sizes": "1 + n % 97",
        "messages_received": stream.count(b"MESSAGE\n"),
        "heart_beat": "0,0",
        "s2c_bytes_received": len(stream),
        "frames_received_nul_lf": stream.count(b"\0\n"),
    }


READ_BYTES = 128
READ_PAUSE_S = 0.002


def nul_lf_cuts(pcap: Path, server_port: int) -> int:
    """Broker segments that end in NUL followed by one starting with LF (sequence order)."""
    import dpkt

    payloads: dict[tuple[int, int], bytes] = {}  # (client port, seq)
    with pcap.open("rb") as f:
        for _, buf in dpkt.pcap.Reader(f):
            tcp = dpkt.ethernet.Ethernet(buf).data.data
            if isinstance(tcp, dpkt.tcp.TCP) and tcp.sport == server_port and tcp.data:
                payloads.setdefault((tcp.dport, tcp.seq), bytes(tcp.data))
    ordered = [payloads[key] for key in sorted(payloads)]
    pairs = zip(ordered, ordered[1:], strict=False)
    return sum(a.endswith(b"\0") and b.startswith(b"\n") for a, b in pairs)


# ---- captures ----------------------------------------------------------------------------------

PROXY_LISTENING = re.compile(r"listening on (\S+):(\d+) -> upstream")


@contextlib.contextmanager
def stomp_capture(upstream_port: int, out: Path) -> Iterator[int]:
    """`stomp-capture` (capture/) listening on a free port in front of 127.0.0.1:upstream_port,
    writing pcapng files into `out`; yields the port clients connect to, stops it with SIGTERM
    (which closes the capture files) when the block exits."""
    argv = [sys.executable, "-m", "capture", "--listen", "127.0.0.1:0"]
    argv += ["--upstream", f"127.0.0.1:{upstream_port}", "--out", str(out)]
    argv += ["--stats-interval", "0", "--prefix", "web-stomp"]
    process = subprocess.Popen(argv, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    lines: list[str] = []
    try:
        while (line := process.stderr.readline()) and not PROXY_LISTENING.search(line):
            lines.append(line)
        match = PROXY_LISTENING.search(line)
        if match is None:
            raise RuntimeError("stomp-capture did not start:\n" + "".join(lines))
        threading.Thread(target=process.stderr.read, daemon=True).start()
        yield int(match[2])
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        if process.wait(timeout=30) != 0:
            raise RuntimeError(f"stomp-capture exited with {process.returncode}")


def capture_through_proxy(name: str, out: Path, broker: WebBroker) -> dict[str, Any]:
    """The web-stomp clients through stomp-capture; the proxy's pcapng is the capture."""
    with tempfile.TemporaryDirectory(prefix="stomp-lake-proxy-") as tmp:
        with stomp_capture(broker.web_port, Path(tmp)) as port:
            via = dataclasses.replace(broker, web_port=port)
            records = [stomppy_ws(via), stompjs(via, deflate=True), stompjs(via, deflate=False)]
        [written] = sorted(Path(tmp).glob("*.pcapng"))
        shutil.copyfile(written, out / f"{name}.pcapng")
    record = {
        "capture": f"{name}.pcapng",
        "port": broker.web_port,
        "proxy_port": port,
        "broker": "RabbitMQ 3.10.8 (Debian rabbitmq-server, rabbitmq_web_stomp)",
        "made_by": "stomp-capture (capture/) between the clients and web-stomp",
        "connections": records,
    }
    (out / f"{name}.record.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def capture(name: str, out: Path, port: int, scenarios: list[Any]) -> dict[str, Any]:
    pcap = out / f"{name}.pcap"
    with tcpdump(pcap, port, nanoseconds=True) as stats:
        records = [scenario() for scenario in scenarios]
    record = {
        "capture": pcap.name,
        "port": port,
        "broker": "RabbitMQ 3.10.8 (Debian rabbitmq-server, rabbitmq_web_stomp)",
        "packets": stats.captured,
        "dropped_by_kernel": stats.dropped_by_kernel,
        "connections": records,
    }
    (out / f"{name}.record.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--only",
        nargs="*",
        default=["web-stomp", "web-mqtt", "back-pressure", "web-stomp-chromium", "web-stomp-proxy"],
    )
    parser.add_argument("--attempts", type=int, default=8, help="nul-lf-split captures at most")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="stomp-lake-web-") as tmp, rabbitmq_web(Path(tmp)) as b:
        if "web-stomp" in args.only:
            capture(
                "web-stomp",
                args.out,
                b.web_port,
                [
                    lambda: stomppy_ws(b),
                    lambda: stompjs(b, deflate=True),
                    lambda: stompjs(b, deflate=False),
                    lambda: fragmenting_client(b),
                    lambda: refused_upgrade(b),
                ],
            )
        if "web-mqtt" in args.only:
            capture("web-mqtt", args.out, b.mqtt_port, [lambda: mqtt_upgrade(b)])
        if "back-pressure" in args.only:
            capture("back-pressure", args.out, b.stomp_port, [lambda: back_pressure(b)])
        if "web-stomp-chromium" in args.only:
            chromium = [lambda: stompjs_chromium(b)]
            capture("rabbitmq-web-stomp-chromium", args.out, b.web_port, chromium)
        if "web-stomp-proxy" in args.only:
            capture_through_proxy("rabbitmq-web-stomp-proxy", args.out, b)
        if "nul-lf-split" in args.only:
            for attempt in range(1, args.attempts + 1):
                record = capture("nul-lf-split", args.out, b.stomp_port, [lambda: nul_lf_split(b)])
                cuts = nul_lf_cuts(args.out / "nul-lf-split.pcap", b.stomp_port)
                print(f"nul-lf-split attempt {attempt}: {cuts} NUL|LF cuts")
                if cuts:
                    record.update(attempt=attempt, nul_lf_cuts=cuts)
                    (args.out / "nul-lf-split.record.json").write_text(
                        json.dumps(record, indent=2) + "\n"
                    )
                    break
    print(f"captures in {args.out}")


if __name__ == "__main__":
    main()
