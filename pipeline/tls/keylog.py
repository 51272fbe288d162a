"""TLS session secrets from NSS key log files (``SSLKEYLOGFILE``), matched to connections by the
ClientHello's random.

The secrets never leave this module in readable form: `Secrets` hides them from ``repr``, and a
line that cannot be read is counted, never quoted, since it may hold a secret.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path

# Labels this layer uses; others (EXPORTER_SECRET, early data, OpenSSL's CLIENT_TRAFFIC_SECRET_N
# after a KeyUpdate, which the next secret derives anyway) are skipped as Wireshark skips them.
LABELS = {
    "CLIENT_RANDOM": "master_secret",
    "CLIENT_HANDSHAKE_TRAFFIC_SECRET": "client_handshake",
    "SERVER_HANDSHAKE_TRAFFIC_SECRET": "server_handshake",
    "CLIENT_TRAFFIC_SECRET_0": "client_traffic",
    "SERVER_TRAFFIC_SECRET_0": "server_traffic",
}
RANDOM_LENGTH = 32
# TLS 1.2's master secret is 48 bytes; a TLS 1.3 traffic secret is as long as the suite's hash
# (SHA-256 or SHA-384). A line with any other length was damaged or is not a key log's.
SECRET_LENGTHS = {name: (48,) if name == "master_secret" else (32, 48) for name in LABELS.values()}


@dataclass(slots=True)
class Secrets:
    """One connection's secrets: TLS 1.2's master secret, or TLS 1.3's traffic secrets."""

    master_secret: bytes | None = field(default=None, repr=False)
    client_handshake: bytes | None = field(default=None, repr=False)
    server_handshake: bytes | None = field(default=None, repr=False)
    client_traffic: bytes | None = field(default=None, repr=False)
    server_traffic: bytes | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        held = [f.name for f in fields(self) if getattr(self, f.name) is not None]
        return f"Secrets(<{', '.join(held) or 'none'}>)"

    @property
    def tls13(self) -> bool:
        return self.client_traffic is not None or self.server_traffic is not None


@dataclass(slots=True)
class KeyLog:
    """Secrets by client random, and how many lines could not be read."""

    secrets: dict[bytes, Secrets] = field(default_factory=dict, repr=False)
    unreadable_lines: int = 0

    def __len__(self) -> int:
        return len(self.secrets)

    def get(self, client_random: bytes) -> Secrets | None:
        return self.secrets.get(client_random)

    def add_lines(self, lines: Iterable[str]) -> None:
        for line in lines:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) != 3:
                self.unreadable_lines += 1
                continue
            name = LABELS.get(parts[0])
            if name is None:
                continue
            try:
                client_random, secret = bytes.fromhex(parts[1]), bytes.fromhex(parts[2])
            except ValueError:
                self.unreadable_lines += 1
                continue
            if len(client_random) != RANDOM_LENGTH or len(secret) not in SECRET_LENGTHS[name]:
                self.unreadable_lines += 1
                continue
            setattr(self.secrets.setdefault(client_random, Secrets()), name, secret)

    def only(self, client_randoms: Iterable[bytes]) -> KeyLog:
        """The secrets of these connections alone: what a task that decodes them needs."""
        wanted = {r: self.secrets[r] for r in client_randoms if r in self.secrets}
        return KeyLog(wanted)


def keylog_files(paths: Iterable[Path]) -> Iterator[Path]:
    """The files named, and the files inside the folders named (sorted, not recursing)."""
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.iterdir() if p.is_file())
        else:
            yield path


def read_keylogs(paths: Iterable[Path]) -> KeyLog:
    """Every key log file of `paths` read once."""
    keylog = KeyLog()
    for path in keylog_files(paths):
        with open(path, encoding="ascii", errors="replace") as lines:
            keylog.add_lines(lines)
    return keylog


def keylog_paths_from_env(value: str | None) -> list[Path]:
    """``$STOMP_LAKE_TLS_KEYLOG``: paths separated by ``:``."""
    return [Path(p) for p in (value or "").split(os.pathsep) if p]


# The key log of the connections a flow-pass task decodes, set by the task: a connection carried
# to the next batch looks its secrets up here rather than carrying the key log with it.
_task_keylog: KeyLog | None = None


def use_keylog(keylog: KeyLog | None) -> None:
    global _task_keylog
    _task_keylog = keylog


def task_secrets(client_random: bytes) -> Secrets | None:
    return None if _task_keylog is None else _task_keylog.get(client_random)
