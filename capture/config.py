"""Proxy configuration: listeners with their upstream brokers, capture and TLS settings.

Built from the command line or from a TOML file (several listeners), e.g.::

    out = "/var/lib/stomp-capture"
    rotate_size = "256M"
    rotate_seconds = 3600
    mask_passcode = true
    capture_mode = "lossless"     # or "drop": never slow traffic, lose capture when behind
    flush_seconds = 1.0
    disk_full_wait = 5.0          # lossless: most a failing disk holds traffic, then drop

    [[listener]]
    listen = "0.0.0.0:61613"
    upstream = "broker.internal:61613"

    [[listener]]
    listen = "[::]:61614"
    upstream = "broker.internal:61614"
    client_tls = { cert = "proxy.pem", key = "proxy.key" }
    upstream_tls = { ca = "broker-ca.pem", server_name = "broker.internal" }
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A setting that cannot be used, with a message meant for the operator."""


@dataclass(frozen=True, slots=True)
class HostPort:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


_HOST_PORT = re.compile(r"^(?:\[(?P<v6>[0-9A-Fa-f:.%\w]+)\]|(?P<host>[^:\[\]\s]+)):(?P<port>\d+)$")


def parse_host_port(text: str, *, allow_zero: bool = False) -> HostPort:
    """``HOST:PORT`` or ``[IPV6]:PORT``."""
    match = _HOST_PORT.match(text.strip())
    if match is None:
        raise ConfigError(f"bad address {text!r}: expected HOST:PORT or [IPV6]:PORT")
    port = int(match["port"])
    if not (0 if allow_zero else 1) <= port <= 65535:
        raise ConfigError(f"bad address {text!r}: port {port} out of range")
    return HostPort(match["v6"] or match["host"], port)


_SIZE = re.compile(r"^(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>[KMGT]?)(?:i?B)?$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str | int) -> int:
    """Bytes from ``1048576``, ``512K``, ``100M``, ``2G`` (binary units)."""
    if isinstance(text, int):
        return text
    match = _SIZE.match(text.strip())
    if match is None:
        raise ConfigError(f"bad size {text!r}: expected a number with an optional K/M/G/T")
    return int(float(match["n"]) * _UNITS[match["unit"].upper()])


def parse_mode(text: str | int) -> int:
    mode = text if isinstance(text, int) else int(text, 8)
    if mode & 0o007:
        raise ConfigError(f"file mode {mode:o} would let others read captured credentials")
    if not mode & 0o400:
        raise ConfigError(f"file mode {mode:o} would not let the owner read the capture")
    return mode


@dataclass(frozen=True, slots=True)
class ClientTls:
    """Terminate TLS (``stomp+ssl``) from clients with this certificate chain and key."""

    cert: Path
    key: Path


@dataclass(frozen=True, slots=True)
class UpstreamTls:
    """Speak TLS to the broker; certificates are verified unless ``verify`` is off."""

    ca: Path | None = None
    verify: bool = True
    server_name: str | None = None
    cert: Path | None = None
    key: Path | None = None


@dataclass(frozen=True, slots=True)
class ListenerConfig:
    listen: HostPort
    upstream: HostPort
    client_tls: ClientTls | None = None
    upstream_tls: UpstreamTls | None = None


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    listeners: tuple[ListenerConfig, ...]
    out_dir: Path | None
    rotate_bytes: int | None = None
    rotate_seconds: float | None = None
    buffer_bytes: int = 64 << 20
    file_mode: int = 0o640
    prefix: str = "stomp"
    mask_passcode: bool = False
    stats_interval: float = 60.0
    drain_seconds: float = 0.0
    connect_timeout: float = 10.0
    check_upstream: bool = True
    lossless: bool = True  # when the capture writer is behind, slow traffic rather than drop
    flush_seconds: float = 1.0  # most time queued capture waits for the disk and fdatasync
    disk_full_wait: float = 5.0  # lossless: most a failing disk holds traffic before dropping
    max_connections: int | None = None  # most open at once; None: what open files allow


CAPTURE_MODES = {"lossless": True, "drop": False}
MAX_FLUSH_SECONDS = 3600.0
MAX_DISK_FULL_WAIT = 3600.0


def parse_capture_mode(text: str) -> bool:
    """True for ``lossless``, False for ``drop``."""
    if text not in CAPTURE_MODES:
        raise ConfigError(f"bad capture mode {text!r}: expected lossless or drop")
    return CAPTURE_MODES[text]


def parse_flush_seconds(value: str | float) -> float:
    try:
        seconds = float(value)
    except ValueError as exc:
        raise ConfigError(f"bad flush interval {value!r}: expected seconds") from exc
    if not 0 < seconds <= MAX_FLUSH_SECONDS:
        raise ConfigError(f"flush interval {seconds} s out of range (0, {MAX_FLUSH_SECONDS:g}]")
    return seconds


def parse_max_connections(value: str | int) -> int:
    try:
        count = int(value)
    except ValueError as exc:
        raise ConfigError(f"bad max connections {value!r}: expected a number") from exc
    if count < 1:
        raise ConfigError(f"max connections {count} must be at least 1")
    return count


def parse_disk_full_wait(value: str | float) -> float:
    """Seconds lossless mode holds traffic for a failing disk; 0 drops at once."""
    try:
        seconds = float(value)
    except ValueError as exc:
        raise ConfigError(f"bad disk-full wait {value!r}: expected seconds") from exc
    if not 0 <= seconds <= MAX_DISK_FULL_WAIT:
        raise ConfigError(f"disk-full wait {seconds} s out of range [0, {MAX_DISK_FULL_WAIT:g}]")
    return seconds


LISTENER_KEYS = {"listen", "upstream", "client_tls", "upstream_tls"}
TOP_KEYS = {
    "listener",
    "out",
    "rotate_size",
    "rotate_seconds",
    "buffer",
    "file_mode",
    "prefix",
    "mask_passcode",
    "stats_interval",
    "drain",
    "connect_timeout",
    "check_upstream",
    "capture_mode",
    "flush_seconds",
    "disk_full_wait",
    "max_connections",
}


def _path(value: Any, base: Path, what: str) -> Path:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{what} must be a path string")
    path = Path(value).expanduser()
    return path if path.is_absolute() else base / path


def _table(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{what} must be a table")
    return value


def client_tls_from(value: Any, base: Path) -> ClientTls:
    table = _table(value, "client_tls")
    unknown = set(table) - {"cert", "key"}
    if unknown or "cert" not in table or "key" not in table:
        raise ConfigError(f"client_tls needs exactly cert and key, got {sorted(table)}")
    return ClientTls(
        _path(table["cert"], base, "client_tls.cert"), _path(table["key"], base, "client_tls.key")
    )


def upstream_tls_from(value: Any, base: Path) -> UpstreamTls:
    table = _table(value, "upstream_tls")
    unknown = set(table) - {"ca", "verify", "server_name", "cert", "key"}
    if unknown:
        raise ConfigError(f"unknown upstream_tls settings: {sorted(unknown)}")

    def optional_path(key: str) -> Path | None:
        return _path(table[key], base, f"upstream_tls.{key}") if key in table else None

    return UpstreamTls(
        ca=optional_path("ca"),
        verify=bool(table.get("verify", True)),
        server_name=table.get("server_name"),
        cert=optional_path("cert"),
        key=optional_path("key"),
    )


def listener_from(value: Any, base: Path) -> ListenerConfig:
    table = _table(value, "listener")
    unknown = set(table) - LISTENER_KEYS
    if unknown:
        raise ConfigError(f"unknown listener settings: {sorted(unknown)}")
    if "listen" not in table or "upstream" not in table:
        raise ConfigError("every [[listener]] needs listen and upstream")
    return ListenerConfig(
        listen=parse_host_port(str(table["listen"]), allow_zero=True),
        upstream=parse_host_port(str(table["upstream"])),
        client_tls=client_tls_from(table["client_tls"], base) if "client_tls" in table else None,
        upstream_tls=(
            upstream_tls_from(table["upstream_tls"], base) if "upstream_tls" in table else None
        ),
    )


def settings_from_toml(path: Path) -> dict[str, Any]:
    """The file's settings as ProxyConfig keyword arguments (paths relative to the file)."""
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
    unknown = set(data) - TOP_KEYS
    if unknown:
        raise ConfigError(f"unknown settings in {path}: {sorted(unknown)}")
    base = path.parent.resolve()
    settings: dict[str, Any] = {}
    listeners = data.get("listener", [])
    if not isinstance(listeners, list):
        raise ConfigError("listener must be an array of tables ([[listener]])")
    settings["listeners"] = tuple(listener_from(item, base) for item in listeners)
    if "out" in data:
        settings["out_dir"] = _path(data["out"], base, "out")
    if "rotate_size" in data:
        settings["rotate_bytes"] = parse_size(data["rotate_size"])
    if "buffer" in data:
        settings["buffer_bytes"] = parse_size(data["buffer"])
    if "file_mode" in data:
        settings["file_mode"] = parse_mode(data["file_mode"])
    if "capture_mode" in data:
        settings["lossless"] = parse_capture_mode(str(data["capture_mode"]))
    if "flush_seconds" in data:
        settings["flush_seconds"] = parse_flush_seconds(data["flush_seconds"])
    if "disk_full_wait" in data:
        settings["disk_full_wait"] = parse_disk_full_wait(data["disk_full_wait"])
    if "max_connections" in data:
        settings["max_connections"] = parse_max_connections(data["max_connections"])
    renamed = {"drain": "drain_seconds"}
    for key in ("rotate_seconds", "prefix", "mask_passcode", "stats_interval", "drain",
                "connect_timeout", "check_upstream"):
        if key in data:
            settings[renamed.get(key, key)] = data[key]
    return settings
