"""Fixtures for the capture proxy tests: real brokers, both event loops, TLS material, a small
real filesystem to fill."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.brokers import activemq, rabbitmq  # noqa: F401  (session fixtures)


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request: pytest.FixtureRequest) -> Callable[[Coroutine[Any, Any, Any]], Any]:
    """Runs a coroutine on a fresh event loop of each kind the proxy supports."""
    if request.param == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        return uvloop.run
    return asyncio.run


@dataclass(frozen=True, slots=True)
class TlsFiles:
    ca: Path
    cert: Path  # for "localhost" and 127.0.0.1, signed by ca
    key: Path
    other_ca: Path  # a CA that did not sign cert


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    if shutil.which("openssl") is None:
        pytest.skip("openssl (Debian package) missing")
    d = tmp_path_factory.mktemp("tls")
    for name in ("ca", "other"):
        _openssl(
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", f"/CN=stomp-lake test {name}", "-keyout", str(d / f"{name}.key"),
            "-out", str(d / f"{name}.pem"),
        )
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
        "-keyout", str(d / "server.key"), "-out", str(d / "server.csr"),
    )
    (d / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    _openssl(
        "x509", "-req", "-in", str(d / "server.csr"), "-CA", str(d / "ca.pem"),
        "-CAkey", str(d / "ca.key"), "-CAcreateserial", "-days", "2",
        "-extfile", str(d / "san.ext"), "-out", str(d / "server.pem"),
    )
    return TlsFiles(d / "ca.pem", d / "server.pem", d / "server.key", d / "other.pem")


@dataclass(frozen=True, slots=True)
class SmallDisk:
    """A real 2 MiB filesystem (tmpfs) that a test fills and frees with a filler file."""

    mount: Path

    @property
    def filler(self) -> Path:
        return self.mount / "filler"

    def free_bytes(self) -> int:
        stats = os.statvfs(self.mount)
        return stats.f_bavail * stats.f_frsize

    def fill(self, leave: int = 0) -> None:
        """Grow the filler until the disk is full, then give back ``leave`` bytes."""
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            block = bytes(1 << 16)
            with contextlib.suppress(OSError):
                while os.write(fd, block):
                    pass
        finally:
            os.close(fd)
        size = self.filler.stat().st_size
        page = os.statvfs(self.mount).f_frsize
        os.truncate(self.filler, max(0, (size - leave) // page * page))
        assert self.free_bytes() >= leave

    def free(self) -> None:
        self.filler.unlink()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    """A 2 MiB tmpfs mounted for the test (needs root; skipped where mount is refused)."""
    if shutil.which("mount") is None:
        pytest.skip("no mount command: cannot make a small real filesystem")
    mount = tmp_path / "small-disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(mount)],
        capture_output=True, text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a 2 MiB tmpfs (root needed): {done.stderr.strip()}")
    try:
        yield SmallDisk(mount)
    finally:
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "--lazy", str(mount)], check=True)
