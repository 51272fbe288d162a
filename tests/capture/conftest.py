"""Fixtures for the capture proxy tests: real brokers, both event loops, TLS material."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import Callable, Coroutine
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
