"""A small asyncio STOMP 1.2 client on the project's own encoder and decoder (pipeline.stomp),
cheap enough to run a thousand at once. It keeps the sha256 and length of every byte it sent and
received and counts frames by command, so tests can compare both ends and the capture."""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from dataclasses import dataclass, field

from pipeline.stomp import NEED_DATA, Decoder, Frame, HeartBeat, Violation, encode_frame

READ_SIZE = 1 << 16


class StompError(RuntimeError):
    """The broker answered with an ERROR frame, or the stream broke the protocol."""


@dataclass(slots=True)
class Tally:
    """What went one way: byte count, running sha256, frames by command (and the bytes
    themselves when ``data`` is given)."""

    length: int = 0
    digest: hashlib._Hash = field(default_factory=hashlib.sha256)
    frames: Counter[str] = field(default_factory=Counter)
    data: bytearray | None = None

    def add(self, data: bytes) -> None:
        self.length += len(data)
        self.digest.update(data)
        if self.data is not None:
            self.data += data

    @property
    def sha256(self) -> str:
        return self.digest.hexdigest()


class AioStompClient:
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, keep_bytes: bool = False
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.decoder = Decoder("1.0")  # CONNECTED is read before the version is known
        self.sent = Tally(data=bytearray() if keep_bytes else None)
        self.received = Tally(data=bytearray() if keep_bytes else None)
        self.local_port: int = writer.get_extra_info("sockname")[1]
        self.version = "1.0"

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        *,
        login: str,
        passcode: str,
        vhost: str = "localhost",
        keep_bytes: bool = False,
    ) -> AioStompClient:
        reader, writer = await asyncio.open_connection(host, port, limit=READ_SIZE)
        client = cls(reader, writer, keep_bytes)
        await client.send_frame(
            "CONNECT",
            [("accept-version", "1.2"), ("host", vhost), ("login", login),
             ("passcode", passcode), ("heart-beat", "0,0")],
        )
        connected = await client.read_frame()
        if connected is None or connected.command != "CONNECTED":
            raise StompError(f"expected CONNECTED, got {connected and connected.command}")
        client.version = connected.get("version") or "1.0"
        client.decoder.version = client.version
        return client

    async def send_frame(
        self, command: str, headers: list[tuple[str, str]], body: bytes = b""
    ) -> None:
        data = encode_frame(command, headers, body, version=self.version)
        self.sent.add(data)
        self.sent.frames[command] += 1
        self.writer.write(data)
        await self.writer.drain()

    async def read_frame(self) -> Frame | None:
        """The next frame (heart-beats skipped); None at the end of the stream."""
        while True:
            event = self.decoder.next_event()
            if event is NEED_DATA:
                data = await self.reader.read(READ_SIZE)
                if not data:
                    self.decoder.feed_eof()
                    if (tail := self.decoder.next_event()) is not NEED_DATA and not isinstance(
                        tail, HeartBeat
                    ):
                        raise StompError(f"stream ended inside a frame: {tail}")
                    return None
                self.received.add(data)
                self.decoder.feed(data)
            elif isinstance(event, Frame):
                self.received.frames[event.command] += 1
                if event.command == "ERROR":
                    raise StompError(f"ERROR from the broker: {event.get('message')}")
                if event.violations:
                    raise StompError(f"{event.command} breaks the protocol: {event.violations}")
                return event
            elif isinstance(event, Violation):
                raise StompError(f"the stream breaks the protocol: {event}")

    async def subscribe(self, destination: str, subscription: str = "0") -> None:
        await self.send_frame(
            "SUBSCRIBE", [("destination", destination), ("id", subscription), ("ack", "auto")]
        )

    async def send(self, destination: str, body: bytes) -> None:
        await self.send_frame(
            "SEND", [("destination", destination), ("content-type", "application/octet-stream")],
            body,
        )

    async def receive_messages(self, count: int) -> list[bytes]:
        bodies: list[bytes] = []
        while len(bodies) < count:
            frame = await self.read_frame()
            if frame is None:
                raise StompError(f"connection ended after {len(bodies)} of {count} messages")
            if frame.command == "MESSAGE":
                bodies.append(frame.body)
        return bodies

    async def disconnect(self, receipt: str = "bye", timeout: float = 30) -> None:
        """DISCONNECT, wait for its RECEIPT and for the broker to close (so every byte it sent
        is counted), then close."""
        await self.send_frame("DISCONNECT", [("receipt", receipt)])

        async def to_the_end() -> None:
            while (frame := await self.read_frame()) is not None:
                if frame.command == "RECEIPT" and frame.get("receipt-id") == receipt:
                    receipted.append(frame)

        receipted: list[Frame] = []
        await asyncio.wait_for(to_the_end(), timeout)
        if not receipted:
            raise StompError("the connection ended without the DISCONNECT receipt")
        self.writer.close()
        await self.writer.wait_closed()

    def abort(self) -> None:
        self.writer.transport.abort()
