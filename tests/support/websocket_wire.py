"""Test helper: WebSocket bytes as real endpoints write them, made by wsproto (python-hyper's
sans-IO WebSocket implementation), plus hand-made frames for what wsproto refuses to write."""

from __future__ import annotations

import os
import struct

from wsproto.extensions import PerMessageDeflate
from wsproto.frame_protocol import FrameProtocol

REQUEST = (
    "GET /ws HTTP/1.1\r\n"
    "Host: localhost:15674\r\n"
    "Upgrade: websocket\r\n"
    "Connection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    "Sec-WebSocket-Version: 13\r\n"
    "Origin: http://localhost:8000\r\n"
    "User-Agent: test-client/1.0\r\n"
    "Sec-WebSocket-Protocol: v10.stomp, v11.stomp, v12.stomp\r\n"
    "{extra}"
    "\r\n"
)
RESPONSE = (
    "HTTP/1.1 {status}\r\n"
    "Upgrade: websocket\r\n"
    "Connection: Upgrade\r\n"
    "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
    "{extra}"
    "\r\n"
)
DEFLATE_OFFER = "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"


def request(extra: str = "") -> bytes:
    return REQUEST.format(extra=extra).encode()


def response(
    status: str = "101 Switching Protocols", protocol: str | None = "v12.stomp", extra: str = ""
) -> bytes:
    if protocol is not None:
        extra = f"Sec-WebSocket-Protocol: {protocol}\r\n{extra}"
    return RESPONSE.format(status=status, extra=extra).encode()


def deflate_extension(
    *, client_no_context_takeover: bool = False, server_no_context_takeover: bool = False
) -> tuple[str, PerMessageDeflate, PerMessageDeflate]:
    """The response header line and the two sides' extension objects, agreed."""
    params = ["permessage-deflate"]
    if client_no_context_takeover:
        params.append("client_no_context_takeover")
    if server_no_context_takeover:
        params.append("server_no_context_takeover")
    value = "; ".join(params)
    client, server = PerMessageDeflate(), PerMessageDeflate()
    client.finalize(value)
    server.finalize(value)
    return f"Sec-WebSocket-Extensions: {value}\r\n", client, server


class Side:
    """One endpoint's frame writer (clients mask, servers do not)."""

    def __init__(self, client: bool, deflate: PerMessageDeflate | None = None) -> None:
        self.protocol = FrameProtocol(client, [deflate] if deflate else [])

    def text(self, data: str | bytes, fin: bool = True) -> bytes:
        payload = data if isinstance(data, str) else data.decode()
        return bytes(self.protocol.send_data(payload, fin))

    def binary(self, data: bytes, fin: bool = True) -> bytes:
        return bytes(self.protocol.send_data(data, fin))

    def ping(self, payload: bytes = b"") -> bytes:
        return bytes(self.protocol.ping(payload))

    def pong(self, payload: bytes = b"") -> bytes:
        return bytes(self.protocol.pong(payload))

    def close(self, code: int | None = 1000, reason: str | None = None) -> bytes:
        return bytes(self.protocol.close(code, reason))


def raw_frame(
    opcode: int,
    payload: bytes,
    *,
    fin: bool = True,
    rsv: int = 0,
    mask: bytes | None = None,
    length_form: int | None = None,
) -> bytes:
    """A frame as written, rules or not; ``length_form`` 126/127 forces a longer length."""
    first = (0x80 if fin else 0) | rsv | opcode
    size = len(payload)
    form = length_form or (size if size < 126 else 126 if size < 65536 else 127)
    mask_bit = 0x80 if mask is not None else 0
    head = bytes([first, mask_bit | form])
    if form == 126:
        head += struct.pack("!H", size)
    elif form == 127:
        head += struct.pack("!Q", size)
    if mask is not None:
        head += mask
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return head + payload


def client_raw(opcode: int, payload: bytes, **options: object) -> bytes:
    return raw_frame(opcode, payload, mask=os.urandom(4), **options)  # type: ignore[arg-type]
