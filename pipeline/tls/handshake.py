"""Handshake messages (sans-IO): a framer that cuts them out of handshake records, keeping the
bodies only of the messages this layer reads, and the hellos' parsers (RFC 8446 4.1, 4.2)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

CLIENT_HELLO = 1
SERVER_HELLO = 2
ENCRYPTED_EXTENSIONS = 8
FINISHED = 20
KEY_UPDATE = 24
KEPT = frozenset({CLIENT_HELLO, SERVER_HELLO, ENCRYPTED_EXTENSIONS, KEY_UPDATE})
MAX_KEPT_BODY = 1 << 16  # a hello of more is not one a client or server sends

EXT_SERVER_NAME = 0
EXT_ALPN = 16
EXT_ENCRYPT_THEN_MAC = 22
EXT_SUPPORTED_VERSIONS = 43
TLS12 = 0x0303
TLS13 = 0x0304
# ServerHello.random of a HelloRetryRequest (RFC 8446 4.1.3)
HELLO_RETRY_RANDOM = bytes.fromhex(
    "CF21AD74E59A6111BE1D8C021E65B891C2A211167ABB8C5E079E09E2C8A8339C"
)


class BadHandshake(ValueError):
    """A hello this layer cannot read."""


@dataclass(frozen=True, slots=True)
class Message:
    msg_type: int
    body: bytes | None  # None: a message whose body this layer does not keep


class HandshakeFramer:
    """Handshake messages out of the concatenated handshake fragments of one direction."""

    __slots__ = ("_head", "_type", "_left", "_body")

    def __init__(self) -> None:
        self._head = bytearray()
        self._type = -1
        self._left = 0
        self._body: bytearray | None = None

    def feed(self, data: bytes) -> list[Message]:
        messages: list[Message] = []
        view = memoryview(data)
        while view:
            if self._type < 0:
                take = min(4 - len(self._head), len(view))
                self._head += view[:take]
                view = view[take:]
                if len(self._head) < 4:
                    break
                self._type = self._head[0]
                self._left = int.from_bytes(self._head[1:4], "big")
                keep = self._type in KEPT and self._left <= MAX_KEPT_BODY
                self._body = bytearray() if keep else None
                self._head.clear()
            take = min(self._left, len(view))
            if self._body is not None:
                self._body += view[:take]
            view = view[take:]
            self._left -= take
            if self._left == 0:
                body = None if self._body is None else bytes(self._body)
                messages.append(Message(self._type, body))
                self._type = -1
                self._body = None
        return messages


@dataclass(frozen=True, slots=True)
class ClientHello:
    random: bytes
    cipher_suites: tuple[int, ...]
    server_name: str | None
    alpn: tuple[str, ...]
    versions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ServerHello:
    random: bytes
    cipher_suite: int
    version: int  # the negotiated version: supported_versions' when present
    alpn: str | None
    encrypt_then_mac: bool

    @property
    def retry(self) -> bool:
        return self.random == HELLO_RETRY_RANDOM


class _Reader:
    __slots__ = ("data", "at")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, size: int) -> bytes:
        end = self.at + size
        if end > len(self.data):
            raise BadHandshake("truncated")
        chunk = self.data[self.at : end]
        self.at = end
        return chunk

    def u8(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        return int(struct.unpack("!H", self.take(2))[0])

    def vector(self, length_bytes: int) -> bytes:
        size = int.from_bytes(self.take(length_bytes), "big")
        return self.take(size)

    @property
    def left(self) -> int:
        return len(self.data) - self.at


def _extensions(reader: _Reader) -> dict[int, bytes]:
    if reader.left == 0:
        return {}
    block = _Reader(reader.vector(2))
    found: dict[int, bytes] = {}
    while block.left:
        kind = block.u16()
        found[kind] = block.vector(2)
    return found


def _alpn(data: bytes | None) -> tuple[str, ...]:
    if data is None:
        return ()
    names = _Reader(_Reader(data).vector(2))
    out = []
    while names.left:
        out.append(names.vector(1).decode("ascii", "replace"))
    return tuple(out)


def _server_name(data: bytes | None) -> str | None:
    if data is None:
        return None
    names = _Reader(_Reader(data).vector(2))
    while names.left:
        kind = names.u8()
        name = names.vector(2)
        if kind == 0:
            return name.decode("ascii", "replace")
    return None


def _u16s(data: bytes) -> tuple[int, ...]:
    count = len(data) // 2
    return tuple(struct.unpack(f"!{count}H", data[: count * 2]))


def parse_client_hello(body: bytes) -> ClientHello:
    reader = _Reader(body)
    legacy_version = reader.u16()
    random = reader.take(32)
    reader.vector(1)  # legacy session id
    suites_data = reader.vector(2)
    reader.vector(1)  # compression methods
    extensions = _extensions(reader)
    suites = _u16s(suites_data)
    versions: tuple[int, ...] = (legacy_version,)
    if EXT_SUPPORTED_VERSIONS in extensions:
        versions = _u16s(_Reader(extensions[EXT_SUPPORTED_VERSIONS]).vector(1))
    return ClientHello(
        random,
        suites,
        _server_name(extensions.get(EXT_SERVER_NAME)),
        _alpn(extensions.get(EXT_ALPN)),
        versions,
    )


def parse_server_hello(body: bytes) -> ServerHello:
    reader = _Reader(body)
    version = reader.u16()
    random = reader.take(32)
    reader.vector(1)  # legacy session id echo
    suite = reader.u16()
    reader.u8()  # compression
    extensions = _extensions(reader)
    if EXT_SUPPORTED_VERSIONS in extensions:
        version = _Reader(extensions[EXT_SUPPORTED_VERSIONS]).u16()
    alpn = _alpn(extensions.get(EXT_ALPN))
    return ServerHello(
        random,
        suite,
        version,
        alpn[0] if alpn else None,
        EXT_ENCRYPT_THEN_MAC in extensions,
    )


def parse_encrypted_extensions(body: bytes) -> str | None:
    """TLS 1.3's negotiated ALPN protocol, which the server sends encrypted."""
    alpn = _alpn(_extensions(_Reader(body)).get(EXT_ALPN))
    return alpn[0] if alpn else None


def version_name(version: int) -> str:
    return {0x0301: "TLS 1.0", 0x0302: "TLS 1.1", TLS12: "TLS 1.2", TLS13: "TLS 1.3"}.get(
        version, f"0x{version:04x}"
    )
