"""The HTTP/1.1 upgrade that opens a WebSocket connection (RFC 6455 section 4), read passively.

A connection is WebSocket when its client opens with ``GET`` and an ``Upgrade: websocket``
header, on any port. The record keeps what an operator asks about: path, subprotocols offered
and chosen, Origin, User-Agent, extensions, response status; and the permessage-deflate
parameters (RFC 7692) the two sides agreed on, which the de-framer needs.
"""

from __future__ import annotations

from dataclasses import dataclass

# An upgrade head (request or response) must end within this many bytes, as HTTP servers bound
# their headers; it is also what the transport holds per direction while the upgrade is
# undecided (`pipeline.websocket.transport`).
MAX_HEAD = 64 * 1024
STOMP_SUBPROTOCOLS: frozenset[str] = frozenset({"v10.stomp", "v11.stomp", "v12.stomp"})
_GET = b"GET "


@dataclass(slots=True, frozen=True)
class Head:
    """An HTTP request or response head: start line split in three, headers in wire order."""

    start: tuple[str, str, str]
    headers: tuple[tuple[str, str], ...]

    def get(self, name: str) -> str | None:
        """All values of ``name`` joined by ", " (as HTTP allows), None when absent."""
        values = [value for key, value in self.headers if key == name]
        return ", ".join(values) if values else None

    def tokens(self, name: str) -> list[str]:
        value = self.get(name)
        return [t.strip() for t in value.split(",") if t.strip()] if value else []


@dataclass(slots=True, frozen=True)
class Deflate:
    """Negotiated permessage-deflate: whether each side's compressor resets per message, and
    the window bits each side compresses with (15 when not limited)."""

    client_no_context_takeover: bool = False
    server_no_context_takeover: bool = False
    client_max_window_bits: int = 15
    server_max_window_bits: int = 15


def head_end(buffer: bytes | bytearray, start: int = 0) -> int:
    """Index just past the blank line that ends an HTTP head, -1 if not there yet.

    ``start``: where to look from, for a buffer that grows and was searched before up to
    ``len - 3`` (a blank line may straddle the old end), so that each byte is looked at once."""
    end = buffer.find(b"\r\n\r\n", start)
    if end >= 0:
        return end + 4
    end = buffer.find(b"\n\n", start)  # bare LF line ends: tolerated, as most servers do
    return end + 2 if end >= 0 else -1


def parse_head(raw: bytes) -> Head | None:
    """Parse a head (start line + header lines); None when the start line is not three parts."""
    text = raw.decode("latin-1")
    lines = [line.rstrip("\r") for line in text.split("\n")]
    parts = lines[0].split(" ", 2)
    if len(parts) < 2:
        return None
    start = (parts[0], parts[1], parts[2] if len(parts) > 2 else "")
    headers = []
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if sep:
            headers.append((name.strip().lower(), value.strip()))
    return Head(start, tuple(headers))


def opening(buffer: bytes | bytearray) -> bool | None:
    """Whether a client stream that starts with ``buffer`` opens a WebSocket connection: None
    while undecided (more bytes needed), else True/False."""
    if len(buffer) < len(_GET):
        return None if _GET.startswith(bytes(buffer)) else False
    if not buffer.startswith(_GET):
        return False
    end = head_end(buffer)
    if end < 0:
        return None if len(buffer) < MAX_HEAD else False
    return is_upgrade(buffer[:end])


def starts_like_get(buffer: bytes | bytearray) -> bool:
    """Whether a client stream that starts with ``buffer`` may still be an upgrade request."""
    if len(buffer) < len(_GET):
        return _GET.startswith(bytes(buffer))
    return buffer.startswith(_GET)


def is_upgrade(head: bytes | bytearray) -> bool:
    """Whether a whole request head asks for ``Upgrade: websocket``."""
    parsed = parse_head(bytes(head))
    return parsed is not None and "websocket" in [t.lower() for t in parsed.tokens("upgrade")]


def deflate_parameters(extensions: list[str]) -> Deflate | None:
    """The permessage-deflate parameters of a response's ``Sec-WebSocket-Extensions`` (one
    entry per comma-separated extension), None when it was not accepted."""
    for entry in extensions:
        name, *params = [p.strip() for p in entry.split(";")]
        if name.lower() != "permessage-deflate":
            continue
        values: dict[str, str] = {}
        for param in params:
            key, _, value = param.partition("=")
            values[key.strip().lower()] = value.strip().strip('"')
        return Deflate(
            "client_no_context_takeover" in values,
            "server_no_context_takeover" in values,
            _window_bits(values, "client_max_window_bits"),
            _window_bits(values, "server_max_window_bits"),
        )
    return None


def _window_bits(values: dict[str, str], key: str) -> int:
    try:
        return min(max(int(values[key]), 8), 15) if values.get(key) else 15
    except ValueError:
        return 15


def status_of(head: Head) -> int | None:
    try:
        return int(head.start[1])
    except ValueError:
        return None
