"""Real TLS conversations made in memory: OpenSSL on both sides (Python's ssl with memory BIOs),
the bytes each side sends recorded in the order they cross, and the client's key log.

What a passive capture of the connection would hold, without sockets or threads: a test feeds the
recorded bytes to the record layer and compares what it decrypts with what was written.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import ssl
import uuid
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from pipeline.net import Direction

_NO_ENCRYPT_THEN_MAC = 0x80000  # SSL_OP_NO_ENCRYPT_THEN_MAC: AES-CBC as MAC-then-encrypt


@dataclass
class Conversation:
    wire: list[tuple[Direction, bytes]] = field(default_factory=list)  # in crossing order
    written: dict[Direction, bytearray] = field(
        default_factory=lambda: {Direction.C2S: bytearray(), Direction.S2C: bytearray()}
    )
    keylog: str = ""
    version: str = ""
    cipher: str = ""

    def stream(self, direction: Direction) -> bytes:
        return b"".join(data for d, data in self.wire if d is direction)


@cache
def certificate(folder: Path) -> tuple[Path, Path]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "broker.test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "broker.crt", folder / "broker.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def _ssl_pointer(obj: object, field: int) -> int:
    """The OpenSSL pointer a Python ssl object wraps: its `field`-th pointer after PyObject_HEAD
    (CPython's _ssl: PySSLContext holds SSL_CTX* first, PySSLSocket its socket then SSL*)."""
    address = id(obj) + (2 + field) * ctypes.sizeof(ctypes.c_void_p)
    return ctypes.c_void_p.from_address(address).value or 0


def _libssl() -> ctypes.CDLL:
    return ctypes.CDLL("libssl.so.3")


def set_tls13_suites(context: ssl.SSLContext, suites: str) -> None:
    """What Python's ssl has no call for: the TLS 1.3 suites a context offers."""
    setter = _libssl().SSL_CTX_set_ciphersuites
    setter.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    if setter(_ssl_pointer(context, 0), suites.encode()) != 1:
        raise ValueError(suites)


def key_update(tls: ssl.SSLObject) -> None:
    """SSL_key_update(ssl, SSL_KEY_UPDATE_NOT_REQUESTED) on the SSL* inside the SSLObject."""
    inner = tls._sslobj  # type: ignore[attr-defined]
    update = _libssl().SSL_key_update
    update.argtypes = [ctypes.c_void_p, ctypes.c_int]
    if update(_ssl_pointer(inner, 1), 0) != 1:
        raise RuntimeError("SSL_key_update failed")


def converse(
    folder: Path,
    *,
    tls13_suite: str | None = None,
    tls12_cipher: str | None = None,
    encrypt_then_mac: bool = True,
    server_name: str = "broker.test",
    alpn: tuple[str, ...] = (),
    exchanges: list[tuple[Direction, bytes]] = (),  # type: ignore[assignment]
    key_update_after: int | None = None,
) -> Conversation:
    """One connection: handshake, then each (direction, bytes) written and read, then both
    sides' close_notify. `tls12_cipher` forces TLS 1.2 with that OpenSSL cipher name."""
    cert, key = certificate(folder)
    keylog = folder / f"keys-{uuid.uuid4().hex}.log"
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert, key)
    client_context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_context.check_hostname = False
    client_context.verify_mode = ssl.CERT_NONE
    client_context.keylog_filename = str(keylog)
    if alpn:
        client_context.set_alpn_protocols(list(alpn))
        server_context.set_alpn_protocols(list(alpn))
    if tls12_cipher is not None:
        client_context.maximum_version = ssl.TLSVersion.TLSv1_2
        client_context.set_ciphers(tls12_cipher)
        if not encrypt_then_mac:
            client_context.options |= _NO_ENCRYPT_THEN_MAC
    if tls13_suite is not None:
        set_tls13_suites(client_context, tls13_suite)
        set_tls13_suites(server_context, tls13_suite)
    pipes = {side: (ssl.MemoryBIO(), ssl.MemoryBIO()) for side in (Direction.C2S, Direction.S2C)}
    # pipes[sender] = (incoming of the sender, outgoing of the sender)
    client = client_context.wrap_bio(*pipes[Direction.C2S], server_hostname=server_name)
    server = server_context.wrap_bio(*pipes[Direction.S2C], server_side=True)
    ends = {Direction.C2S: client, Direction.S2C: server}
    talk = Conversation()

    def pump() -> None:
        moved = True
        while moved:
            moved = False
            for sender in (Direction.C2S, Direction.S2C):
                receiver = sender.reverse
                data = pipes[sender][1].read()
                if data:
                    talk.wire.append((sender, data))
                    pipes[receiver][0].write(data)
                    moved = True

    def step(tls: ssl.SSLObject, call: str) -> bool:
        try:
            getattr(tls, call)()
            return True
        except ssl.SSLWantReadError:
            return False

    done = {Direction.C2S: False, Direction.S2C: False}
    while not all(done.values()):
        for side, tls in ends.items():
            if not done[side]:
                done[side] = step(tls, "do_handshake")
        pump()
    for number, (sender, data) in enumerate(exchanges):
        if key_update_after is not None and number == key_update_after:
            key_update(ends[sender])
        ends[sender].write(data)
        talk.written[sender] += data
        pump()
        received = bytearray()
        while len(received) < len(data):
            received += ends[sender.reverse].read(1 << 20)
            pump()
        assert bytes(received) == data
    for side in (Direction.C2S, Direction.S2C):
        with contextlib.suppress(ssl.SSLWantReadError, ssl.SSLZeroReturnError):
            ends[side].unwrap()
        pump()
    talk.keylog = keylog.read_text()
    talk.version = client.version() or ""
    talk.cipher = (client.cipher() or ("",))[0]
    return talk


def write_capture(
    talk: Conversation,
    path: Path,
    *,
    client: tuple[str, int] = ("10.0.0.5", 40123),
    server: tuple[str, int] = ("10.0.0.1", 61614),
) -> Path:
    """The conversation as a pcap a passive capture would hold: its bytes in 1460-byte segments
    in the order they crossed, with the TCP handshake and FINs (`tests.support.pcapgen`)."""
    from tests.support import pcapgen

    chunks = [pcapgen.Chunk(direction is Direction.C2S, data) for direction, data in talk.wire]
    conversation = pcapgen.Conversation(client=client, server=server, chunks=chunks)
    capture = pcapgen.generate([conversation])
    pcapgen.write_pcap(path, capture.packets, linktype=pcapgen.LINKTYPE_ETHERNET, nanos=True)
    return path
