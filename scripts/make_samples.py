"""Make the bundled real sample captures in samples/ (see samples/README.md).

Usage: .venv/bin/python scripts/make_samples.py --out samples/ [--only NAME ...]

Per sample: start the Debian broker (tests/support/brokers.py), start tcpdump on lo,
run the scripted stomp.py scenario, stop tcpdump, write <name>.<ext> and
<name>.expected.json (the client-side record), then cross-check the capture against the
record with tshark and retry the whole sample (fresh broker) if they disagree.
Needs root (tcpdump, RabbitMQ) and the packages from scripts/install-system-deps.sh.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import socket
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sample_scenarios as scenarios  # noqa: E402
from capture_check import compare  # noqa: E402
from tcpdump_capture import tcpdump  # noqa: E402

from tests.support.brokers import Broker, free_port, running_broker  # noqa: E402

FORMAT_VERSION = 1
STOMP_PORT = 61613
ATTEMPTS = 3
MAX_FILE_BYTES = 300_000
DEBIAN_PACKAGES = {"activemq": "activemq", "rabbitmq": "rabbitmq-server"}
HEART_BEAT_RULE = (
    "a heart-beat is an EOL (LF or CRLF) between frames, except the single EOL that directly"
    " follows a frame's NUL (part of that frame); counts are stomp.py's on_send/on_heartbeat"
    " and were checked against the capture with this rule"
)
WEBSOCKET_RULE = (
    "; over WebSocket the same WebSocket message stands for the same TCP segment (a message"
    " holding only an EOL is a heart-beat)"
)


@dataclass(frozen=True, slots=True)
class SampleSpec:
    name: str
    broker: str
    file_format: str  # "pcap" (microseconds), "pcap-nanosecond" or "pcapng"
    scenario: scenarios.Scenario
    transport: str = "tcp"  # "websocket": captured on the broker's web-stomp port

    @property
    def file_name(self) -> str:
        return f"{self.name}.pcapng" if self.file_format == "pcapng" else f"{self.name}.pcap"


SAMPLES = (
    SampleSpec("activemq-queues-acks", "activemq", "pcap", scenarios.activemq_queues_acks),
    SampleSpec("rabbitmq-topics-tx", "rabbitmq", "pcapng", scenarios.rabbitmq_topics_tx),
    SampleSpec(
        "activemq-heartbeat-v10", "activemq", "pcap-nanosecond", scenarios.activemq_heartbeat_v10
    ),
    SampleSpec(
        "rabbitmq-heartbeat-errors", "rabbitmq", "pcap", scenarios.rabbitmq_heartbeat_errors
    ),
    SampleSpec(
        "rabbitmq-websocket",
        "rabbitmq",
        "pcap-nanosecond",
        scenarios.rabbitmq_websocket,
        transport="websocket",
    ),
)


def _command_output(*argv: str) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    return (result.stdout or result.stderr).strip()


def _package_version(package: str) -> str:
    return _command_output("dpkg-query", "-W", "-f=${Version}", package)


def _port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        # As the brokers bind: a previous run's TIME_WAIT sockets must not count as busy.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _totals(connections: list[dict[str, Any]]) -> dict[str, Any]:
    sent: Counter[str] = Counter()
    received: Counter[str] = Counter()
    for conn in connections:
        sent.update(conn["frames_sent"])
        received.update(conn["frames_received"])
    return {
        "connections": len(connections),
        "frames_sent": dict(sorted(sent.items())),
        "frames_received": dict(sorted(received.items())),
        "heart_beats_sent": sum(c["heart_beats_sent"] for c in connections),
        "heart_beats_received": sum(c["heart_beats_received"] for c in connections),
        "messages_received": sum(len(c["message_ids_received"]) for c in connections),
        "errors_received": sum(len(c["errors_received"]) for c in connections),
    }


def captured_port(spec: SampleSpec, broker: Broker) -> int:
    if spec.transport == "websocket":
        assert broker.web_port is not None, "the broker serves no STOMP over WebSocket"
        return broker.web_port
    return broker.stomp_port


def _expected_record(
    spec: SampleSpec, broker: Broker, connections: list[dict[str, Any]], packets: int | None
) -> dict[str, Any]:
    servers = [c["server"] for c in connections if c["server"]]
    websocket = spec.transport == "websocket"
    web = {"web_port": broker.web_port, "ws_path": "/ws"} if websocket else {}
    return {
        "format_version": FORMAT_VERSION,
        "sample": spec.name,
        "file": spec.file_name,
        "file_format": spec.file_format,
        "description": " ".join((spec.scenario.__doc__ or "").split()),
        "made_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "broker": {
            "kind": broker.kind,
            "debian_package": DEBIAN_PACKAGES[broker.kind],
            "package_version": _package_version(DEBIAN_PACKAGES[broker.kind]),
            "server_header": servers[0] if servers else None,
            "host": broker.host,
            "stomp_port": broker.stomp_port,
            **web,
        },
        "client": {"name": "stomp.py", "version": version("stomp.py")},
        "capture": {
            "tool": _command_output("tcpdump", "--version").splitlines()[0],
            "interface": "lo",
            "filter": f"tcp port {captured_port(spec, broker)}",
            "packets": packets,
        },
        "heart_beat_rule": HEART_BEAT_RULE + (WEBSOCKET_RULE if websocket else ""),
        "totals": _totals(connections),
        "connections": connections,
    }


def _capture_once(spec: SampleSpec, out: Path, port: int) -> tuple[Path, dict[str, Any], list[str]]:
    final = out / spec.file_name
    with tempfile.TemporaryDirectory(prefix="stomp-lake-sample-") as scratch:
        # tcpdump drops to its own user; copying makes the sample ours.
        raw = Path(scratch) / "raw.pcap"
        with running_broker(spec.broker, stomp_port=port) as broker:
            nano = spec.file_format != "pcap"
            with tcpdump(raw, captured_port(spec, broker), nanoseconds=nano) as stats:
                result = spec.scenario(broker)
            connections = [c.record.to_json() for c in result.connections]
            for connection in result.left_open:
                with contextlib.suppress(Exception):
                    connection.disconnect()
        if spec.file_format == "pcapng":
            subprocess.run(["editcap", "-F", "pcapng", str(raw), str(final)], check=True)
        else:
            shutil.copyfile(raw, final)
    expected = _expected_record(spec, broker, connections, stats.captured)
    problems = compare(expected, final)
    if stats.dropped_by_kernel:
        problems.append(f"tcpdump dropped {stats.dropped_by_kernel} packets")
    if final.stat().st_size > MAX_FILE_BYTES:
        problems.append(f"{final.name} is {final.stat().st_size} bytes (> {MAX_FILE_BYTES})")
    return final, expected, problems


def make_sample(spec: SampleSpec, out: Path, port: int) -> Path:
    for attempt in range(1, ATTEMPTS + 1):
        final, expected, problems = _capture_once(spec, out, port)
        if not problems:
            json_path = out / f"{spec.name}.expected.json"
            json_path.write_text(json.dumps(expected, indent=2, ensure_ascii=False) + "\n")
            totals = expected["totals"]
            print(
                f"{final.name}: {final.stat().st_size} bytes, {totals['connections']} connections,"
                f" sent {totals['frames_sent']}, received {totals['frames_received']},"
                f" beats {totals['heart_beats_sent']}/{totals['heart_beats_received']}"
            )
            return final
        print(f"{spec.name} attempt {attempt}: capture and client record disagree:")
        for problem in problems:
            print(f"  {problem}")
    raise SystemExit(f"{spec.name}: no consistent capture after {ATTEMPTS} attempts")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "samples")
    parser.add_argument("--only", nargs="*", choices=[s.name for s in SAMPLES])
    parser.add_argument("--port", type=int, default=STOMP_PORT, help="broker STOMP port")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for spec in SAMPLES:
        if not args.only or spec.name in args.only:
            port = args.port if _port_is_free(args.port) else free_port()
            make_sample(spec, args.out, port)


if __name__ == "__main__":
    main()
