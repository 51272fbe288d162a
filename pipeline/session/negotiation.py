"""Version negotiation and heart-beat terms (CONNECT/STOMP against CONNECTED)."""

from __future__ import annotations

from pipeline.session.clock import elapsed_ms
from pipeline.session.streams import Stamp
from pipeline.stomp.commands import VERSIONS

DEFAULT_VERSION = "1.0"  # no accept-version (client) or no version header (server)


def offered_versions(accept_version: str | None) -> tuple[str, ...]:
    if accept_version is None:
        return (DEFAULT_VERSION,)
    return tuple(v.strip() for v in accept_version.split(",") if v.strip())


def negotiated_version(connected_version: str | None) -> str:
    return DEFAULT_VERSION if connected_version is None else connected_version.strip()


def decoder_version(version: str) -> str | None:
    """The codec rules for a negotiated version, or None when the codec does not know it."""
    return version if version in VERSIONS else None


def parse_heart_beat(value: str | None) -> tuple[int, int] | None:
    """``"cx,cy"`` as two ints; (0, 0) when absent; None when malformed."""
    if value is None:
        return 0, 0
    parts = value.split(",")
    if len(parts) != 2:
        return None
    try:
        first, second = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    if first < 0 or second < 0:
        return None
    return first, second


def heart_beat_intervals(client: tuple[int, int], server: tuple[int, int]) -> tuple[int, int]:
    """(c2s_ms, s2c_ms): each direction beats every MAX(sender can, receiver wants) ms, 0 = none."""
    cx, cy = client
    sx, sy = server
    c2s = 0 if cx == 0 or sy == 0 else max(cx, sy)
    s2c = 0 if sx == 0 or cy == 0 else max(sx, cy)
    return c2s, s2c


Problem = tuple[str, str]  # (anomaly kind, detail)


class Handshake:
    """What CONNECT/STOMP and CONNECTED said, and what follows from it."""

    __slots__ = (
        "connect_command",
        "connect_at",
        "accept_version",
        "host",
        "login",
        "client_heart_beat",
        "connected_at",
        "version",
        "server",
        "server_session",
        "server_heart_beat",
        "intervals",
    )

    def __init__(self) -> None:
        self.connect_command: str | None = None
        self.connect_at: Stamp | None = None
        self.accept_version: str | None = None
        self.host: str | None = None
        self.login: str | None = None
        self.client_heart_beat: str | None = None
        self.connected_at: Stamp | None = None
        self.version: str | None = None
        self.server: str | None = None
        self.server_session: str | None = None
        self.server_heart_beat: str | None = None
        self.intervals: tuple[int, int] | None = None  # (c2s_ms, s2c_ms), 0 = none

    def connect(self, command: str, headers: dict[str, str], at: Stamp) -> list[Problem]:
        if self.connect_at is not None:
            return [("repeated_connect", f"{command} after the connection was opened")]
        self.connect_command = command
        self.connect_at = at
        self.accept_version = headers.get("accept-version")
        self.host = headers.get("host")
        self.login = headers.get("login", headers.get("username"))
        self.client_heart_beat = headers.get("heart-beat")
        if parse_heart_beat(self.client_heart_beat) is None:
            return [("bad_heart_beat", f"CONNECT heart-beat {self.client_heart_beat!r}")]
        return []

    def connected(self, headers: dict[str, str], at: Stamp) -> list[Problem]:
        if self.connected_at is not None:
            return [("repeated_connected", "CONNECTED after the connection was established")]
        problems: list[Problem] = []
        self.connected_at = at
        version = self.version = negotiated_version(headers.get("version"))
        if self.connect_at is not None and version not in offered_versions(self.accept_version):
            detail = f"server chose {version!r}, client offered {self.accept_version!r}"
            problems.append(("version_not_offered", detail))
        if decoder_version(version) is None:
            problems.append(("unknown_version", f"version {version!r} is not 1.0, 1.1 or 1.2"))
        self.server = headers.get("server")
        self.server_session = headers.get("session")
        self.server_heart_beat = headers.get("heart-beat")
        server_terms = parse_heart_beat(self.server_heart_beat)
        if server_terms is None:
            problems.append(("bad_heart_beat", f"CONNECTED heart-beat {self.server_heart_beat!r}"))
        client_terms = parse_heart_beat(self.client_heart_beat) or (0, 0)
        self.intervals = heart_beat_intervals(client_terms, server_terms or (0, 0))
        return problems

    def columns(self) -> dict[str, object]:
        """The handshake's columns of the ``sessions`` row."""
        connect, connected, intervals = self.connect_at, self.connected_at, self.intervals
        return {
            "connect_command": self.connect_command,
            "accept_version": self.accept_version,
            "version": self.version,
            "host": self.host,
            "login": self.login,
            "server": self.server,
            "server_session": self.server_session,
            "connected_at": connected.ts if connected else None,
            "connected_at_ns": connected.ts_ns if connected else None,
            "connect_latency_ms": elapsed_ms(connect.ts_ns, connected.ts_ns)
            if connect and connected
            else None,
            "client_heart_beat": self.client_heart_beat,
            "server_heart_beat": self.server_heart_beat,
            "heartbeat_c2s_ms": intervals[0] if intervals else None,
            "heartbeat_s2c_ms": intervals[1] if intervals else None,
        }
