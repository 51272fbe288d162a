"""The WebSocket path against the TCP path: the same STOMP traffic (a broker's MESSAGEs and a
client's ACKs) through the session model directly, and through the WebSocket transport first,
without and with permessage-deflate. Prints seconds and MB/s per STOMP byte, best of N.

    .venv/bin/python benchmarks/bench_websocket.py [--messages 20000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from functools import partial

from wsproto.extensions import Extension, PerMessageDeflate
from wsproto.frame_protocol import FrameProtocol

from pipeline.session import Endpoint, SessionModel
from pipeline.stomp import encode_frame
from pipeline.websocket import Transport, apply

SEGMENT = 1460
REQUEST = (
    b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
    b"Sec-WebSocket-Protocol: v12.stomp\r\n\r\n"
)


def response(deflate: bool) -> bytes:
    extension = "Sec-WebSocket-Extensions: permessage-deflate\r\n" if deflate else ""
    return (
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Protocol: v12.stomp\r\n{extension}\r\n"
    ).encode()


def traffic(messages: int) -> tuple[list[bytes], list[bytes]]:
    """STOMP frames of each direction (each one WebSocket message)."""
    c2s = [encode_frame("CONNECT", [("accept-version", "1.2"), ("host", "/")])]
    c2s.append(
        encode_frame(
            "SUBSCRIBE", [("id", "0"), ("destination", "/q"), ("ack", "client-individual")]
        )
    )
    s2c = [encode_frame("CONNECTED", [("version", "1.2")]) + b"\n"]
    for n in range(messages):
        headers = [("subscription", "0"), ("message-id", f"m-{n}"), ("ack", f"a-{n}")]
        headers += [("destination", "/q"), ("content-type", "application/json")]
        body = json.dumps({"n": n, "price": n * 1.5, "text": "x" * 300}).encode()
        s2c.append(encode_frame("MESSAGE", headers, body) + b"\n")
        c2s.append(encode_frame("ACK", [("id", f"a-{n}")]))
    return c2s, s2c


def segments(stream: bytes) -> list[bytes]:
    return [stream[i : i + SEGMENT] for i in range(0, len(stream), SEGMENT)]


def websocket_streams(c2s: list[bytes], s2c: list[bytes], deflate: bool) -> tuple[bytes, bytes]:
    def side(client: bool) -> FrameProtocol:
        extensions: list[Extension] = []
        if deflate:
            extension = PerMessageDeflate()
            extension.finalize("permessage-deflate")
            extensions.append(extension)
        return FrameProtocol(client, extensions)

    client, server = side(True), side(False)
    c = REQUEST + b"".join(bytes(client.send_data(m.decode())) for m in c2s)
    s = response(deflate) + b"".join(bytes(server.send_data(m.decode())) for m in s2c)
    return c, s


def interleave(c2s: bytes, s2c: bytes) -> list[tuple[str, int, bytes]]:
    """(direction, offset, data) segments, the two directions alternating."""
    out, a, b = [], segments(c2s), segments(s2c)
    at = {"c2s": 0, "s2c": 0}
    for i in range(max(len(a), len(b))):
        for direction, pieces in (("c2s", a), ("s2c", b)):
            if i < len(pieces):
                out.append((direction, at[direction], pieces[i]))
                at[direction] += len(pieces[i])
    return out


def _model() -> SessionModel:
    return SessionModel("b", Endpoint("10.0.0.1", 1), Endpoint("10.0.0.2", 2))


def tcp_path(script: list[tuple[str, int, bytes]]) -> None:
    model = _model()
    for n, (direction, offset, data) in enumerate(script):
        model.on_data(direction, n, offset, data)
        if n % 64 == 0:
            model.drain()
    model.finish(len(script))


def websocket_path(script: list[tuple[str, int, bytes]]) -> None:
    model, transport = _model(), Transport()
    for n, (direction, offset, data) in enumerate(script):
        apply(model, transport.receive(direction, n, offset, data))
        if n % 64 == 0:
            model.drain()
    model.finish(len(script))


def best(run: Callable[[], None], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    c2s, s2c = traffic(args.messages)
    stomp_bytes = sum(map(len, c2s)) + sum(map(len, s2c))
    tcp_script = interleave(b"".join(c2s), b"".join(s2c))
    tcp = best(lambda: tcp_path(tcp_script), args.repeat)
    result = {"stomp_mb": round(stomp_bytes / 1e6, 2), "tcp_s": round(tcp, 3)}
    result["tcp_mb_s"] = round(stomp_bytes / 1e6 / tcp, 1)
    for deflate in (False, True):
        ws_script = interleave(*websocket_streams(c2s, s2c, deflate))
        wire = sum(len(d) for _, _, d in ws_script)
        seconds = best(partial(websocket_path, ws_script), args.repeat)
        name = "ws_deflate" if deflate else "ws"
        result[f"{name}_wire_mb"] = round(wire / 1e6, 2)
        result[f"{name}_s"] = round(seconds, 3)
        result[f"{name}_mb_s"] = round(stomp_bytes / 1e6 / seconds, 1)
        result[f"{name}_cost_vs_tcp"] = round(seconds / tcp, 2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
