from __future__ import annotations

import threading
from pathlib import Path

import pytest
import stomp

from tests.support import brokers
from tests.support.brokers import (  # noqa: F401
    Broker,
    activemq,
    broker_available,
    free_port,
    rabbitmq,
    running_broker,
    stomp_handshake,
)

pytestmark = [pytest.mark.broker, pytest.mark.slow]


class _Inbox(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.headers: list[dict[str, str]] = []
        self.arrived = threading.Event()
        self.connected_version: str | None = None

    def on_connected(self, frame: stomp.utils.Frame) -> None:
        self.connected_version = frame.headers.get("version")

    def on_message(self, frame: stomp.utils.Frame) -> None:
        self.bodies.append(frame.body)
        self.headers.append(dict(frame.headers))
        self.arrived.set()


def _round_trip(broker: Broker) -> tuple[str | None, list[bytes], list[dict[str, str]]]:
    conn = stomp.Connection12([broker.address], vhost=broker.vhost, auto_decode=False)
    inbox = _Inbox()
    conn.set_listener("inbox", inbox)
    conn.connect(broker.login, broker.passcode, wait=True)
    try:
        conn.subscribe("/queue/smoke", id="s1", ack="auto")
        conn.send("/queue/smoke", b"hello\x00world", headers={"note": "a:b"}, receipt="r1")
        assert inbox.arrived.wait(10), f"no MESSAGE from {broker.kind} within 10 s"
    finally:
        conn.disconnect(receipt="bye")
    return inbox.connected_version, inbox.bodies, inbox.headers


@pytest.mark.parametrize("kind", ["activemq", "rabbitmq"])
def test_broker_is_available_here(kind: str) -> None:
    assert broker_available(kind) is None


def test_unknown_kind_is_reported() -> None:
    assert "unknown broker kind" in (broker_available("kafka") or "")


def test_missing_package_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(brokers, "ACTIVEMQ_JAR", tmp_path / "absent.jar")
    assert "install the Debian package 'activemq'" in (broker_available("activemq") or "")


def test_given_port_and_workdir_are_used_and_broker_is_stopped(tmp_path: Path) -> None:
    port = free_port()
    with running_broker("activemq", stomp_port=port, workdir=tmp_path) as broker:
        assert broker.stomp_port == port
        assert stomp_handshake(broker).startswith(b"CONNECTED")
    assert (tmp_path / "conf" / "activemq.xml").is_file()
    assert (tmp_path / "stdout.log").is_file()
    with pytest.raises(OSError):
        stomp_handshake(broker, timeout=1.0)


def test_activemq_round_trip(activemq: Broker) -> None:  # noqa: F811
    version, bodies, headers = _round_trip(activemq)
    assert version == "1.2"
    assert bodies == [b"hello\x00world"]
    assert headers[0]["note"] == "a:b"


def test_rabbitmq_round_trip(rabbitmq: Broker) -> None:  # noqa: F811
    version, bodies, headers = _round_trip(rabbitmq)
    assert version == "1.2"
    assert bodies == [b"hello\x00world"]
    assert headers[0]["note"] == "a:b"
