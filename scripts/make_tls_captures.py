"""Real STOMP-over-TLS captures: RabbitMQ 3.10 (rabbitmq_stomp's TLS listener) and ActiveMQ 5.17
(`stomp+ssl`) from the Debian packages, stomp.py 9 over Python's ssl writing a key log,
tcpdump on loopback. Each capture comes with the client's key log (DIR/<name>.keys, NSS format)
and its own record of what it sent and received (DIR/<name>.record.json).

    sudo .venv/bin/python scripts/make_tls_captures.py --out DIR [--only NAME ...]

Captures (DIR/rabbitmq-stomp-<name>.pcap, DIR/activemq-stomp-<name>.pcap):
  tls13           RabbitMQ, TLS 1.3 (SNI stomp-lake.test): STOMP 1.2 with heart-beats 500 ms,
                  SUBSCRIBE client-individual, 6 SENDs (3 with receipts), their MESSAGEs, 5 ACK
                  + 1 NACK, a KeyUpdate both ways half-way, DISCONNECT with a receipt
  tls12-chacha    the same session over TLS 1.2, ECDHE-RSA-CHACHA20-POLY1305
  ssl-tls12-gcm   ActiveMQ `stomp+ssl` (JKS keystore made by keytool from a PKCS#12), the same
                  session over TLS 1.2, ECDHE-RSA-AES256-GCM-SHA384 (activemq-stomp-ssl-tls12-gcm)
  tls13-large     RabbitMQ, TLS 1.3: one 200 KB SEND and its MESSAGE, the client's SO_SNDBUF and
                  SO_RCVBUF shrunk to 8 KiB before connect() so records span TCP segments
  tls13-missing-key
                  RabbitMQ, TLS 1.3: two connections, the key log holding only the second's
  web-stomp-tls13 RabbitMQ web-stomp over wss:// (rabbitmq-web-stomp-tls13): stomp.py
                  WSStompConnection, TLS 1.3, the session of tls13 with 4 SENDs, no KeyUpdate
  tls13-dsb       tls13's capture with its key log embedded as a pcapng Decryption Secrets
                  Block (`editcap --inject-secrets`); made with tls13

Needs root (tcpdump, the brokers), openssl, the JRE's keytool (ActiveMQ) and editcap (tls13-dsb).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import datetime
import hashlib
import ipaddress
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import types
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import stomp  # noqa: E402
import stomp.transport  # noqa: E402
from cryptography import x509  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402
from make_websocket_captures import _Recorder, _wait_port  # noqa: E402
from tcpdump_capture import tcpdump  # noqa: E402

from tests.support import brokers  # noqa: E402
from tests.support.tls_pair import _libssl, _ssl_pointer  # noqa: E402

SERVER_NAME = "stomp-lake.test"
STORE_PASSWORD = "stomp-lake"
RABBITMQ = "RabbitMQ 3.10.8 (Debian rabbitmq-server, rabbitmq_stomp TLS listener)"
RABBITMQ_WEB = "RabbitMQ 3.10.8 (Debian rabbitmq-server, rabbitmq_web_stomp TLS listener)"
ACTIVEMQ = "ActiveMQ 5.17.2 (Debian activemq, stomp+ssl transport)"
SSL_KEY_UPDATE_REQUESTED = 1

# ---- certificates ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Pki:
    ca: Path
    cert: Path
    key: Path
    keystore: Path  # JKS, for ActiveMQ
    truststore: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_pki(folder: Path) -> Pki:
    """A CA and a broker certificate for stomp-lake.test, localhost and 127.0.0.1 (PEM), and the
    same key and certificate as JKS stores made by keytool from an openssl PKCS#12."""
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("stomp-lake test CA"))
        .issuer_name(_name("stomp-lake test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    names: list[x509.GeneralName] = [x509.DNSName(SERVER_NAME), x509.DNSName("localhost")]
    names.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(SERVER_NAME))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    pki = Pki(
        folder / "ca.pem",
        folder / "broker.pem",
        folder / "broker.key",
        folder / "broker.jks",
        folder / "trust.jks",
    )
    pki.ca.write_bytes(ca.public_bytes(pem))
    pki.cert.write_bytes(cert.public_bytes(pem))
    pki.key.write_bytes(
        key.private_bytes(
            pem, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        )
    )
    os.chmod(pki.key, 0o644)  # the broker may run as another user
    if shutil.which("keytool") is not None:
        p12 = folder / "broker.p12"
        secret = f"pass:{STORE_PASSWORD}"
        _run(
            ["openssl", "pkcs12", "-export", "-in", pki.cert, "-inkey", pki.key, "-name", "broker"]
            + ["-certfile", pki.ca, "-out", p12, "-passout", secret]
        )
        store = ["-deststoretype", "JKS", "-deststorepass", STORE_PASSWORD, "-noprompt"]
        _run(
            ["keytool", "-importkeystore", "-srckeystore", p12, "-srcstoretype", "PKCS12"]
            + ["-srcstorepass", STORE_PASSWORD, "-destkeystore", pki.keystore, *store]
            + ["-destkeypass", STORE_PASSWORD]
        )
        _run(
            ["keytool", "-importcert", "-alias", "ca", "-file", pki.ca]
            + ["-keystore", pki.truststore, "-storetype", "JKS"]
            + ["-storepass", STORE_PASSWORD, "-noprompt"]
        )
    return pki


def _run(argv: list[Any]) -> None:
    subprocess.run(
        [str(a) for a in argv], check=True, capture_output=True, stdin=subprocess.DEVNULL
    )


# ---- brokers -----------------------------------------------------------------------------------

RABBITMQ_TLS_CONF = """\
listeners.tcp = none
stomp.listeners.tcp.1 = 127.0.0.1:{plain}
stomp.listeners.ssl.1 = 127.0.0.1:{tls}
ssl_options.cacertfile = {ca}
ssl_options.certfile = {cert}
ssl_options.keyfile = {key}
ssl_options.versions.1 = tlsv1.3
ssl_options.versions.2 = tlsv1.2
ssl_options.verify = verify_none
ssl_options.fail_if_no_peer_cert = false
web_stomp.tcp.ip = 127.0.0.1
web_stomp.tcp.port = {web}
web_stomp.ssl.ip = 127.0.0.1
web_stomp.ssl.port = {web_tls}
web_stomp.ssl.cacertfile = {ca}
web_stomp.ssl.certfile = {cert}
web_stomp.ssl.keyfile = {key}
web_stomp.ssl.versions.1 = tlsv1.3
web_stomp.ssl.versions.2 = tlsv1.2
"""


@dataclass(frozen=True, slots=True)
class TlsBroker:
    kind: str
    tls_port: int
    login: str
    passcode: str
    vhost: str | None
    ca: Path
    web_tls_port: int | None = None  # RabbitMQ's web-stomp over TLS, path /ws


@contextlib.contextmanager
def _started(broker: brokers.Broker, launch: Any, workdir: Path, tls_port: int) -> Iterator[None]:
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
        _wait_port(tls_port)
        yield
    finally:
        brokers._stop(process)


@contextlib.contextmanager
def rabbitmq_tls(workdir: Path, pki: Pki) -> Iterator[TlsBroker]:
    """RabbitMQ with a plain STOMP listener (to see it is up) and a TLS one (1.3 and 1.2), its
    own epmd port so it never meets another node's epmd."""
    plain, tls = brokers.free_port(), brokers.free_port()
    web, web_tls = brokers.free_port(), brokers.free_port()
    broker = brokers.Broker("rabbitmq", "127.0.0.1", plain, "guest", "guest", "/")
    launch = brokers._rabbitmq_launch(broker, workdir)
    (workdir / "rabbitmq.conf").write_text(
        RABBITMQ_TLS_CONF.format(
            plain=plain, tls=tls, web=web, web_tls=web_tls, ca=pki.ca, cert=pki.cert, key=pki.key
        )
    )
    (workdir / "enabled_plugins").write_text("[rabbitmq_stomp,rabbitmq_web_stomp].\n")
    epmd_port = brokers.free_port()
    launch.env["ERL_EPMD_PORT"] = str(epmd_port)
    try:
        with _started(broker, launch, workdir, tls):
            _wait_port(web_tls)
            yield TlsBroker("rabbitmq", tls, "guest", "guest", "/", pki.ca, web_tls)
    finally:
        epmd = shutil.which("epmd") or "/usr/lib/erlang/bin/epmd"
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            env = dict(os.environ, ERL_EPMD_PORT=str(epmd_port))
            subprocess.run([epmd, "-kill"], env=env, capture_output=True, timeout=10)


@contextlib.contextmanager
def activemq_tls(workdir: Path, pki: Pki) -> Iterator[TlsBroker]:
    """ActiveMQ with `stomp://` (to see it is up) and `stomp+ssl://` from a JKS keystore."""
    plain, tls = brokers.free_port(), brokers.free_port()
    broker = brokers.Broker("activemq", "127.0.0.1", plain, "admin", "admin", None)
    launch = brokers._activemq_launch(broker, workdir)
    stores = {"keystore": pki.keystore, "truststore": pki.truststore, "password": STORE_PASSWORD}
    (workdir / "conf" / "activemq.xml").write_text(
        brokers.activemq_xml(
            broker,
            workdir / "data",
            brokers.ACTIVEMQ_SSL_CONTEXT.format(**stores),
            brokers.ACTIVEMQ_TLS_CONNECTOR.format(host=broker.host, port=tls),
        )
    )
    with _started(broker, launch, workdir, tls):
        yield TlsBroker("activemq", tls, "admin", "admin", None, pki.ca)


# ---- stomp.py over TLS with a key log ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClientTls:
    """How the client's TLS is set up: stomp.py builds its own SSLContext, so these are applied
    by swapping the `ssl` and `socket` modules stomp.transport sees (`_client_tls`)."""

    keylog: Path
    tls12_ciphers: str | None = None  # forces TLS 1.2 with these OpenSSL cipher names
    socket_buffer: int | None = None  # SO_SNDBUF and SO_RCVBUF before connect()


class _Context(ssl.SSLContext):
    def wrap_socket(self, sock: socket.socket, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        kwargs["server_hostname"] = SERVER_NAME  # SNI; the certificate names it
        return super().wrap_socket(sock, *args, **kwargs)


def _client_context(options: ClientTls, protocol: int = ssl.PROTOCOL_TLS_CLIENT) -> ssl.SSLContext:
    context = _Context(protocol)
    context.keylog_filename = str(options.keylog)
    if options.tls12_ciphers is not None:
        context.maximum_version = ssl.TLSVersion.TLSv1_2
        context.set_ciphers(options.tls12_ciphers)
    return context


@contextlib.contextmanager
def _client_tls(options: ClientTls) -> Iterator[None]:
    def make_context(protocol: int) -> ssl.SSLContext:
        return _client_context(options, protocol)

    def create_connection(address: tuple[str, int], timeout: Any = None, *_: Any) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if options.socket_buffer is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, options.socket_buffer)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, options.socket_buffer)
        if timeout is not None:
            sock.settimeout(timeout)
        sock.connect(address)
        return sock

    ssl_module = types.SimpleNamespace(**vars(ssl))
    ssl_module.SSLContext = make_context
    socket_module = types.SimpleNamespace(**vars(socket))
    socket_module.create_connection = create_connection
    saved = stomp.transport.ssl, stomp.transport.socket
    stomp.transport.ssl, stomp.transport.socket = ssl_module, socket_module
    try:
        yield
    finally:
        stomp.transport.ssl, stomp.transport.socket = saved


ESCAPES12 = {"\\\\": "\\", "\\c": ":", "\\n": "\n", "\\r": "\r"}


def unescape12(value: str) -> str:
    """stomp.py hands `on_send` its frame with the 1.2 escapes applied (`\\c` for `:`); the
    record keeps header values as the application gave them."""
    return re.sub(r"\\[\\cnr]", lambda m: ESCAPES12[m[0]], value)


class _OrderedRecorder(_Recorder):
    """The websocket captures' recorder, plus the frames in the order they went and came."""

    def __init__(self) -> None:
        super().__init__()
        self.sent_frames: list[dict[str, Any]] = []
        self.received_frames: list[dict[str, Any]] = []

    def _note(self, into: list[dict[str, Any]], frame: Any) -> None:
        keep = ("destination", "receipt", "receipt-id", "id", "message-id", "subscription", "ack")
        headers = {k: v for k, v in frame.headers.items() if k in keep}
        body = frame.body if isinstance(frame.body, bytes) else (frame.body or "").encode()
        into.append(
            {
                "command": frame.cmd,
                "headers": headers,
                "body_length": len(body),
                "body_sha256": hashlib.sha256(body).hexdigest(),
            }
        )

    def on_send(self, frame: Any) -> None:
        super().on_send(frame)
        if frame.cmd not in ("heartbeat", None):
            self._note(self.sent_frames, frame)
            headers = self.sent_frames[-1]["headers"]
            for name, value in headers.items():
                headers[name] = unescape12(value)

    def on_connected(self, frame: Any) -> None:
        frame.cmd = "CONNECTED"
        self._note(self.received_frames, frame)
        super().on_connected(frame)

    def on_message(self, frame: Any) -> None:
        frame.cmd = "MESSAGE"
        self._note(self.received_frames, frame)
        super().on_message(frame)

    def on_receipt(self, frame: Any) -> None:
        frame.cmd = "RECEIPT"
        self._note(self.received_frames, frame)
        super().on_receipt(frame)

    def on_error(self, frame: Any) -> None:
        frame.cmd = "ERROR"
        self._note(self.received_frames, frame)
        super().on_error(frame)


def _key_update(sock: ssl.SSLSocket) -> None:
    """SSL_key_update(SSL_KEY_UPDATE_REQUESTED): this side's next write carries a KeyUpdate that
    asks the broker to update its keys too (Python's ssl has no call for it)."""
    update = _libssl().SSL_key_update
    update.argtypes = [ctypes.c_void_p, ctypes.c_int]
    inner = sock._sslobj  # type: ignore[attr-defined]
    if update(_ssl_pointer(inner, 1), SSL_KEY_UPDATE_REQUESTED) != 1:
        raise RuntimeError("SSL_key_update failed")


def stomp_session(
    broker: TlsBroker,
    options: ClientTls,
    *,
    bodies: list[str],
    heart_beats: bool = True,
    key_update: bool = False,
    nack_last: bool = True,
    web: bool = False,
) -> dict[str, Any]:
    """stomp.py 1.2 over TLS: SUBSCRIBE client-individual, SENDs (every other one with a receipt),
    their MESSAGEs ACKed (the last NACKed), heart-beats, DISCONNECT with a receipt. With `web`,
    `WSStompConnection` to web-stomp over wss:// (websocket-client takes the SSLContext)."""
    queue = f"/queue/tls-{uuid.uuid4().hex[:6]}"
    beats = (500, 500) if heart_beats else (0, 0)
    recorder = _OrderedRecorder()
    conn: Any
    if web:
        assert broker.web_tls_port is not None
        address = ("127.0.0.1", broker.web_tls_port)
        conn = stomp.WSStompConnection([address], ws_path="/ws", heartbeats=beats, vhost="/")
        conn.set_ssl(for_hosts=[address])
        context = _client_context(options)
        context.load_verify_locations(str(broker.ca))
        conn.transport.get_ssl(address).update(context=context, server_hostname=SERVER_NAME)
        conn.set_listener("record", recorder)
        conn.connect(broker.login, broker.passcode, wait=True)
        sock = conn.transport.socket.sock
    else:
        address = ("127.0.0.1", broker.tls_port)
        with _client_tls(options):
            conn = stomp.Connection12([address], heartbeats=beats, vhost=broker.vhost)
            conn.set_ssl(for_hosts=[address], ca_certs=str(broker.ca))
            conn.set_listener("record", recorder)
            conn.connect(broker.login, broker.passcode, wait=True)
        sock = conn.transport.socket
    tls = {"version": sock.version(), "cipher": sock.cipher()[0], "server_name": SERVER_NAME}
    conn.subscribe(queue, id="1", ack="client-individual", receipt="sub-1")
    for n, body in enumerate(bodies):
        receipt = {"receipt": f"send-{n}"} if n % 2 == 0 else {}
        conn.send(queue, body, content_type="application/json", **receipt)
    for _ in bodies:
        if not recorder.messages.acquire(timeout=20):
            raise TimeoutError(f"{len(recorder.message_ids)} of {len(bodies)} MESSAGEs came")
    if key_update:
        _key_update(sock)
        tls["key_update"] = "client, requested"
    split = len(bodies) - 1 if nack_last else len(bodies)
    acked, nacked = recorder.ack_ids[:split], recorder.ack_ids[split:]
    for ack_id in acked:
        conn.ack(ack_id)
    for ack_id in nacked:
        conn.nack(ack_id)
    if heart_beats:
        time.sleep(1.6)
    conn.disconnect(receipt="bye")
    client = "stomp.py 9 WSStompConnection over wss" if web else "stomp.py 9 Connection12 over ssl"
    record = recorder.record(client)
    record.update(
        acked=acked,
        nacked=nacked,
        destination=queue,
        tls=tls,
        sent_frames=recorder.sent_frames,
        received_frames=recorder.received_frames,
    )
    return record


def json_bodies(count: int) -> list[str]:
    return [json.dumps({"n": n, "text": "caf\u00e9 " * (n + 1)}) for n in range(count)]


# ---- captures ----------------------------------------------------------------------------------


def capture(
    name: str,
    out: Path,
    broker: TlsBroker,
    made_by: str,
    sessions: list[Callable[[], dict[str, Any]]],
) -> dict[str, Any]:
    pcap = out / f"{name}.pcap"
    with tcpdump(pcap, broker.tls_port, nanoseconds=True) as stats:
        records = [session() for session in sessions]
    record = {
        "capture": pcap.name,
        "keys": f"{name}.keys",
        "port": broker.tls_port,
        "broker": {"rabbitmq": RABBITMQ, "rabbitmq-web": RABBITMQ_WEB}.get(broker.kind, ACTIVEMQ),
        "made_by": made_by,
        "packets": stats.captured,
        "dropped_by_kernel": stats.dropped_by_kernel,
        "connections": records,
    }
    (out / f"{name}.record.json").write_text(json.dumps(record, indent=2) + "\n")
    print(f"{name}: {stats.captured} packets, {pcap.stat().st_size} bytes")
    return record


def _fresh(path: Path) -> Path:
    path.unlink(missing_ok=True)  # Python appends to a key log
    return path


def rabbitmq_captures(out: Path, broker: TlsBroker, only: list[str], scratch: Path) -> None:
    if "tls13" in only:
        name = "rabbitmq-stomp-tls13"
        keys = ClientTls(_fresh(out / f"{name}.keys"))
        session = lambda: stomp_session(broker, keys, bodies=json_bodies(6), key_update=True)  # noqa: E731
        capture(name, out, broker, "TLS 1.3, a client KeyUpdate (requested) half-way", [session])
    if "tls12-chacha" in only:
        name = "rabbitmq-stomp-tls12-chacha"
        keys = ClientTls(_fresh(out / f"{name}.keys"), "ECDHE-RSA-CHACHA20-POLY1305")
        session = lambda: stomp_session(broker, keys, bodies=json_bodies(6))  # noqa: E731
        capture(name, out, broker, "TLS 1.2, ECDHE-RSA-CHACHA20-POLY1305", [session])
    if "tls13-large" in only:
        name = "rabbitmq-stomp-tls13-large"
        keys = ClientTls(_fresh(out / f"{name}.keys"), socket_buffer=8192)
        body = "".join(f"{n:07d}," for n in range(25_000))  # 200,000 bytes
        session = lambda: stomp_session(  # noqa: E731
            broker, keys, bodies=[body], heart_beats=False, nack_last=False
        )
        capture(name, out, broker, "TLS 1.3, SO_SNDBUF/SO_RCVBUF 8192", [session])
    if "tls13-missing-key" in only:
        name = "rabbitmq-stomp-tls13-missing-key"
        lost = ClientTls(_fresh(scratch / "lost.keys"))
        kept = ClientTls(_fresh(out / f"{name}.keys"))
        sessions = [
            lambda: stomp_session(broker, lost, bodies=json_bodies(2), heart_beats=False),
            lambda: stomp_session(broker, kept, bodies=json_bodies(3), heart_beats=False),
        ]
        record = capture(
            name, out, broker, "TLS 1.3, the first connection's keys left out", sessions
        )
        record["connections"][0]["keys_in_keylog"] = False
        record["connections"][1]["keys_in_keylog"] = True
        (out / f"{name}.record.json").write_text(json.dumps(record, indent=2) + "\n")
    if "tls13-dsb" in only:
        pcap, keys_file = out / "rabbitmq-stomp-tls13.pcap", out / "rabbitmq-stomp-tls13.keys"
        dsb = out / "rabbitmq-stomp-tls13-dsb.pcapng"
        _run(["editcap", "--inject-secrets", f"tls,{keys_file}", pcap, dsb])
        print(f"{dsb.name}: {dsb.stat().st_size} bytes")
    if "web-stomp-tls13" in only:
        name = "rabbitmq-web-stomp-tls13"
        keys = ClientTls(_fresh(out / f"{name}.keys"))
        session = lambda: stomp_session(broker, keys, bodies=json_bodies(4), web=True)  # noqa: E731
        assert broker.web_tls_port is not None
        web = dataclasses.replace(broker, kind="rabbitmq-web", tls_port=broker.web_tls_port)
        capture(name, out, web, "web-stomp over wss://, TLS 1.3", [session])


def activemq_captures(out: Path, broker: TlsBroker) -> None:
    name = "activemq-stomp-ssl-tls12-gcm"
    keys = ClientTls(_fresh(out / f"{name}.keys"), "ECDHE-RSA-AES256-GCM-SHA384")
    session = lambda: stomp_session(broker, keys, bodies=json_bodies(6))  # noqa: E731
    capture(name, out, broker, "TLS 1.2, ECDHE-RSA-AES256-GCM-SHA384", [session])


RABBITMQ_NAMES = [
    "tls13",
    "tls12-chacha",
    "tls13-large",
    "tls13-missing-key",
    "tls13-dsb",
    "web-stomp-tls13",
]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", nargs="*", default=[*RABBITMQ_NAMES, "ssl-tls12-gcm"])
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="stomp-lake-tls-") as tmp:
        scratch = Path(tmp)
        pki = make_pki(scratch / "pki")
        if "ssl-tls12-gcm" in args.only:
            with activemq_tls(scratch / "activemq", pki) as broker:
                activemq_captures(args.out, broker)
        if set(args.only) & set(RABBITMQ_NAMES):
            with rabbitmq_tls(scratch / "rabbitmq", pki) as broker:
                rabbitmq_captures(args.out, broker, args.only, scratch)
    print(f"captures in {args.out}")


if __name__ == "__main__":
    main()
