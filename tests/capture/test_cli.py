"""`stomp-capture` as operators run it: a subprocess between real stomp.py clients and a real
Debian broker, checked byte for byte on both ends, in tshark and through the pipeline's reader."""

from __future__ import annotations

import calendar
import contextlib
import hashlib
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import stomp

from capture.recorder import STILL_OPEN_COMMENT
from capture.stats import parse_stats_line
from capture.writer import PARTIAL_SUFFIX
from pipeline.ingest import CaptureReader, TcpPacket
from tests.capture.conftest import SmallDisk
from tests.capture.harness import reassemble_captures
from tests.support.brokers import Broker, running_broker

REPO = Path(__file__).resolve().parents[2]
LISTENING = re.compile(r"listening on (\S+):(\d+) -> upstream")

needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark missing")


# --- the proxy as a subprocess ---------------------------------------------------------------


@dataclass
class ProxyProcess:
    process: subprocess.Popen[str]
    port: int
    out: Path
    lines: list[str] = field(default_factory=list)

    def stats(self) -> dict[str, int]:
        stats = [line for line in list(self.lines) if " stats " in line]
        return parse_stats_line(stats[-1].split(" INFO ", 1)[1]) if stats else {}

    def wait_for(self, condition: Callable[[dict[str, int]], bool], timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while not condition(self.stats()):
            assert time.monotonic() < deadline, f"proxy never reached it: {self.stats()}"
            time.sleep(0.05)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> dict[str, int]:
        """Signal the proxy, wait for it to exit 0, return its summary counters."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        assert self.process.wait(timeout) == 0, "\n".join(self.lines)
        time.sleep(0.05)  # let the reader thread take the last lines
        [summary] = [line for line in self.lines if " summary " in line]
        return parse_stats_line(summary.split(" INFO ", 1)[1])

    def files(self) -> list[Path]:
        return sorted(self.out.glob("*.pcapng"))


def _collect(stream: object, lines: list[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        lines.append(line.rstrip("\n"))


@contextlib.contextmanager
def capture_proxy(
    upstream: tuple[str, int],
    out: Path,
    *extra: str,
    preexec_fn: Callable[[], None] | None = None,
) -> Iterator[ProxyProcess]:
    argv = [
        sys.executable, "-m", "capture",
        "--listen", "127.0.0.1:0",
        "--upstream", f"{upstream[0]}:{upstream[1]}",
        "--out", str(out),
        "--stats-interval", "0.1",
        *extra,
    ]
    process = subprocess.Popen(
        argv, cwd=REPO, stderr=subprocess.PIPE, text=True, preexec_fn=preexec_fn
    )
    assert process.stderr is not None
    lines: list[str] = []
    port = None
    deadline = time.monotonic() + 20
    while port is None:
        line = process.stderr.readline()
        assert line and time.monotonic() < deadline, "proxy did not start:\n" + "\n".join(lines)
        lines.append(line.rstrip("\n"))
        if match := LISTENING.search(line):
            port = int(match[2])
    threading.Thread(target=_collect, args=(process.stderr, lines), daemon=True).start()
    proxy = ProxyProcess(process, port, out, lines)
    try:
        yield proxy
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def run_cli(*args: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "capture", *args],
        cwd=REPO, capture_output=True, text=True, timeout=timeout,
    )


# --- what the broker side receives: a hashing TCP relay in front of the broker -------------


@dataclass
class RelayedConnection:
    to_broker: bytearray = field(default_factory=bytearray)
    from_broker: bytearray = field(default_factory=bytearray)
    done: int = 0


class HashingRelay:
    """Plain TCP pipe proxy -> broker that keeps every byte it passes, per connection."""

    def __init__(self, broker: tuple[str, int]) -> None:
        self.broker = broker
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = self.listener.getsockname()
        self.connections: list[RelayedConnection] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                downstream, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.broker)
            record = RelayedConnection()
            with self._lock:
                self.connections.append(record)
            for src, dst, buf in (
                (downstream, upstream, record.to_broker),
                (upstream, downstream, record.from_broker),
            ):
                threading.Thread(
                    target=self._pipe, args=(src, dst, buf, record), daemon=True
                ).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, buf: bytearray,
              record: RelayedConnection) -> None:
        try:
            while chunk := src.recv(65536):
                buf.extend(chunk)
                dst.sendall(chunk)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.close()
        finally:
            with self._lock:
                record.done += 1

    def hashes(self, timeout: float = 10) -> list[tuple[str, str]]:
        deadline = time.monotonic() + timeout
        while any(c.done < 2 for c in self.connections):
            assert time.monotonic() < deadline, "relayed connections never finished"
            time.sleep(0.02)
        # connections that carried nothing are the proxy's startup check of its upstream
        return sorted(
            (_sha(c.to_broker), _sha(c.from_broker))
            for c in self.connections
            if c.to_broker or c.from_broker
        )

    def close(self) -> None:
        self.listener.close()


def _sha(data: bytes | bytearray) -> str:
    return hashlib.sha256(data).hexdigest()


# --- a stomp.py client that keeps the bytes it sent and received ----------------------------


class Listener(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.messages: list[bytes] = []
        self.disconnected = threading.Event()

    def on_message(self, frame: stomp.utils.Frame) -> None:
        self.messages.append(frame.body)

    def on_disconnected(self) -> None:
        self.disconnected.set()


class RecordingClient:
    def __init__(self, port: int, broker: Broker) -> None:
        self.broker = broker
        self.conn = stomp.Connection12(
            [("127.0.0.1", port)], heartbeats=(0, 0), vhost=broker.vhost or "localhost",
            auto_decode=False, reconnect_attempts_max=1,
        )
        self.listener = Listener()
        self.conn.set_listener("", self.listener)
        self.sent = bytearray()
        self.received = bytearray()
        self.local_port = 0
        transport = self.conn.transport
        send, receive = transport.send, transport.receive

        def recording_send(data: bytes) -> None:
            self.sent.extend(data)
            send(data)

        def recording_receive() -> bytes | None:
            data = receive()
            if data:
                self.received.extend(data)
            return data

        transport.send = recording_send
        transport.receive = recording_receive

    def connect(self) -> None:
        self.conn.connect(self.broker.login, self.broker.passcode, wait=True)
        self.local_port = self.conn.transport.socket.getsockname()[1]

    def exchange(self, queue: str, bodies: list[bytes], timeout: float = 20) -> None:
        """Subscribe, send every body, wait until all came back."""
        self.conn.subscribe(queue, id="1", ack="auto")
        for body in bodies:
            self.conn.send(queue, body, content_type="application/octet-stream")
        deadline = time.monotonic() + timeout
        while len(self.listener.messages) < len(bodies):
            assert time.monotonic() < deadline, f"{len(self.listener.messages)}/{len(bodies)}"
            time.sleep(0.01)
        assert sorted(self.listener.messages) == sorted(bodies)

    def disconnect(self) -> None:
        self.conn.disconnect(receipt="bye")
        self.listener.disconnected.wait(10)

    def hashes(self) -> tuple[str, str]:
        return _sha(self.sent), _sha(self.received)


def tshark_conversations(path: Path) -> list[str]:
    """Client-side ports of the TCP conversations tshark lists in ``-z conv,tcp``."""
    out = subprocess.run(
        ["tshark", "-r", str(path), "-q", "-z", "conv,tcp"],
        capture_output=True, text=True, check=True,
    )
    return re.findall(r"^\S+:(\d+)\s+<->\s+\S+:\d+", out.stdout, re.MULTILINE)


def comments(path: Path) -> list[str]:
    with CaptureReader(str(path)) as reader:
        list(reader)
        return [text for _, text in reader.comments]


# --- operator errors --------------------------------------------------------------------------


def test_help_explains_every_option() -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    options = re.findall(r"^\s+(--[a-z-]+)", result.stdout, re.MULTILINE)
    assert len(options) >= 25
    for option in ("--listen", "--upstream", "--out", "--rotate-size", "--rotate-seconds",
                   "--buffer", "--drain", "--mask-passcode", "--tls-cert", "--upstream-ca"):
        assert option in options
    assert "SIGTERM" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--listen", "nonsense", "--upstream", "127.0.0.1:1", "--out", "x"], "bad address"),
        (["--listen", "127.0.0.1:0", "--upstream", "[::1]", "--out", "x"], "bad address"),
        (["--listen", "127.0.0.1:0", "--out", "x"], "one --upstream for every --listen"),
        (["--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:1"], "--out DIR"),
        ([], "nothing to do"),
        (["--config", "/nonexistent/proxy.toml"], "cannot read config file"),
        (["--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:1", "--out", "x",
          "--disk-full-wait", "-1"], "out of range"),
    ],
)
def test_bad_arguments_get_a_clear_error(args: list[str], message: str) -> None:
    result = run_cli(*args)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_unreachable_upstream_and_unwritable_output_are_refused(tmp_path: Path) -> None:
    dead = _closed_port()
    result = run_cli("--listen", "127.0.0.1:0", "--upstream", f"127.0.0.1:{dead}",
                     "--out", str(tmp_path))
    assert result.returncode == 2
    assert f"upstream 127.0.0.1:{dead} is unreachable" in result.stderr

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with socket.create_server(("127.0.0.1", 0)) as server:
        upstream = f"127.0.0.1:{server.getsockname()[1]}"
        result = run_cli("--listen", "127.0.0.1:0", "--upstream", upstream,
                         "--out", str(blocker / "caps"))
        assert result.returncode == 2
        assert f"output directory {blocker / 'caps'} is not writable" in result.stderr

        taken = server.getsockname()[1]
        result = run_cli("--listen", f"127.0.0.1:{taken}", "--upstream", upstream,
                         "--out", str(tmp_path / "caps"))
        assert result.returncode == 2 and "cannot listen" in result.stderr


# --- real broker, real clients ------------------------------------------------------------------


def _bodies(seed: int, count: int) -> list[bytes]:
    sizes = [0, 1, 100, 4096, 70_000, 200_000]
    return [
        hashlib.sha256(f"{seed}-{i}".encode()).digest() * (sizes[i % len(sizes)] // 32 + 1)
        for i in range(count)
    ]


@pytest.mark.broker
@needs_tshark
def test_many_clients_through_the_proxy_byte_for_byte(
    activemq: Broker, tmp_path: Path
) -> None:
    relay = HashingRelay(activemq.address)
    clients: list[RecordingClient] = []
    errors: list[BaseException] = []
    with capture_proxy(relay.address, tmp_path) as proxy:

        def session(i: int) -> None:
            try:
                client = RecordingClient(proxy.port, activemq)
                clients.append(client)
                client.connect()
                client.exchange(f"/queue/many-{i}", _bodies(i, 12))
                client.disconnect()
            except BaseException as exc:  # reported below, with the others
                errors.append(exc)

        threads = [threading.Thread(target=session, args=(i,)) for i in range(40)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert not errors, errors[:3]
        proxy.wait_for(lambda s: s.get("connections_open") == 0 and s["connections_total"] == 40)
        summary = proxy.stop()
    relayed = relay.hashes()
    relay.close()

    assert sorted(client.hashes() for client in clients) == relayed
    sent = sum(len(c.sent) for c in clients)
    received = sum(len(c.received) for c in clients)
    assert summary["bytes_client_to_server"] == sent
    assert summary["bytes_server_to_client"] == received
    assert summary["bytes_captured"] == sent + received and summary["bytes_dropped"] == 0

    [path] = proxy.files()
    assert not list(tmp_path.glob("*" + PARTIAL_SUFFIX))
    assert sorted(map(int, tshark_conversations(path))) == sorted(c.local_port for c in clients)
    captured = {conn.client[1]: conn for conn in reassemble_captures([path])}
    for client in clients:
        conn = captured[client.local_port]
        assert conn.gaps == []
        assert bytes(conn.sent) == client.sent and bytes(conn.received) == client.received
        assert conn.server == relay.address
        assert (conn.client_end, conn.server_end) == ("fin", "fin")


@pytest.mark.broker
def test_masked_passcode_in_the_capture_only(
    activemq: Broker, tmp_path: Path
) -> None:
    with capture_proxy(activemq.address, tmp_path, "--mask-passcode") as proxy:
        client = RecordingClient(proxy.port, activemq)
        client.connect()
        client.exchange("/queue/masked", [b"passcode:" + activemq.passcode.encode()])
        client.disconnect()
        proxy.stop()
    [conn] = reassemble_captures(proxy.files())
    secret = f"\npasscode:{activemq.passcode}\n".encode()
    assert secret in client.sent and secret not in conn.sent
    assert len(conn.sent) == len(client.sent)
    assert bytes(conn.sent) == client.sent.replace(
        secret, b"\npasscode:" + b"*" * len(activemq.passcode) + b"\n", 1
    )


KILLED_CLIENT = textwrap.dedent(
    """
    import os, signal, socket, sys
    sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    sock.sendall(("CONNECT\\naccept-version:1.2\\nhost:localhost\\nlogin:%s\\npasscode:%s\\n\\n\\0"
                  % (sys.argv[2], sys.argv[3])).encode())
    answer = b""
    while b"\\0" not in answer:
        answer += sock.recv(4096)
    sock.sendall(b"SEND\\ndestination:/queue/cut\\ncontent-length:1000\\n\\n" + b"x" * 300)
    print(sock.getsockname()[1], flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


@pytest.mark.broker
def test_a_client_killed_mid_frame(
    activemq: Broker, tmp_path: Path
) -> None:
    with capture_proxy(activemq.address, tmp_path) as proxy:
        killed = subprocess.run(
            [sys.executable, "-c", KILLED_CLIENT, str(proxy.port), activemq.login,
             activemq.passcode],
            capture_output=True, text=True, timeout=30,
        )
        assert killed.returncode == -signal.SIGKILL
        port = int(killed.stdout)
        proxy.wait_for(lambda s: s.get("connections_open") == 0 and s["connections_total"] == 1)
        survivor = RecordingClient(proxy.port, activemq)  # the proxy is still fine
        survivor.connect()
        survivor.disconnect()
        proxy.stop()
    captured = {conn.client[1]: conn for conn in reassemble_captures(proxy.files())}
    conn = captured[port]
    assert conn.sent.endswith(b"content-length:1000\n\n" + b"x" * 300)
    assert conn.client_end in ("fin", "rst") and conn.server_end in ("fin", "rst")


@pytest.mark.broker
def test_the_broker_going_away_mid_session(tmp_path: Path) -> None:
    with contextlib.ExitStack() as stack:
        with running_broker("activemq") as broker:
            proxy = stack.enter_context(capture_proxy(broker.address, tmp_path))
            client = RecordingClient(proxy.port, broker)
            client.connect()
            client.exchange("/queue/leaving", [b"before the broker left"])
            port = client.local_port
        # the broker has stopped under the open session; the proxy carries on
        assert client.listener.disconnected.wait(20)
        proxy.wait_for(lambda s: s.get("connections_open") == 0)
        late = RecordingClient(proxy.port, broker)
        # the proxy resets it: there is no broker to connect to (stomp.py reports the reset as
        # one of these, depending on whether it comes before or after CONNECT is sent; EBADF
        # when its receiver thread closed the socket before CONNECT went out)
        failures = (
            stomp.exception.ConnectFailedException,
            stomp.exception.NotConnectedException,
            OSError,
        )
        with pytest.raises(failures):
            late.connect()
        proxy.wait_for(lambda s: s.get("upstream_failures", 0) >= 1)
        summary = proxy.stop()
    assert summary["connections_total"] >= 2
    captured = reassemble_captures(proxy.files())
    conn = next(c for c in captured if c.client[1] == port)
    assert conn.server_end in ("fin", "rst")
    assert bytes(conn.received) == client.received


@pytest.mark.broker
@needs_tshark
def test_rotation_while_a_connection_stays_open(
    activemq: Broker, tmp_path: Path
) -> None:
    with capture_proxy(activemq.address, tmp_path, "--rotate-seconds", "0.4") as proxy:
        client = RecordingClient(proxy.port, activemq)
        client.connect()
        client.conn.subscribe("/queue/rotating", id="1")
        for i in range(15):
            client.conn.send("/queue/rotating", f"message {i}".encode())
            time.sleep(0.1)
        client.disconnect()
        summary = proxy.stop()
    files = proxy.files()
    assert len(files) >= 3 and summary["files_written"] == len(files)
    for path in files:
        assert subprocess.run(["tshark", "-r", str(path)], capture_output=True).returncode == 0
    [conn] = reassemble_captures(files)
    assert conn.gaps == [] and bytes(conn.sent) == client.sent
    assert bytes(conn.received) == client.received


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, 300_000))


@pytest.mark.broker
def test_a_full_disk_loses_capture_not_traffic(
    activemq: Broker, tmp_path: Path
) -> None:
    """RLIMIT_FSIZE makes every capture file full at 300 kB: writes fail as on a full disk
    (and with --disk-full-wait 0 lossless mode drops at once, as drop mode does)."""
    bodies = _bodies(7, 18)
    with capture_proxy(
        activemq.address, tmp_path, "--rotate-seconds", "1.5", "--disk-full-wait", "0",
        preexec_fn=_limit_file_size,
    ) as proxy:
        client = RecordingClient(proxy.port, activemq)
        client.connect()
        client.exchange("/queue/full-disk", bodies[:9])
        time.sleep(1.7)  # a new file starts, which has room again
        client.listener.messages.clear()
        client.exchange("/queue/full-disk", bodies[9:])
        client.disconnect()
        summary = proxy.stop()
    assert summary["bytes_dropped"] > 0 and summary["write_errors"] > 0
    assert summary["bytes_client_to_server"] == len(client.sent)
    [conn] = reassemble_captures(proxy.files())
    assert conn.gaps
    for from_client, offset, size in conn.gaps:
        original = client.sent if from_client else client.received
        original[offset : offset + size] = bytes(size)
    assert bytes(conn.sent) == client.sent[: len(conn.sent)]
    assert bytes(conn.received) == client.received[: len(conn.received)]
    assert all(path.stat().st_size <= 300_000 for path in proxy.files())


@pytest.mark.broker
def test_sigterm_marks_open_connections_and_leaves_valid_files(
    activemq: Broker, tmp_path: Path
) -> None:
    with capture_proxy(activemq.address, tmp_path) as proxy:
        clients = [RecordingClient(proxy.port, activemq) for _ in range(3)]
        for client in clients:
            client.connect()
        proxy.wait_for(lambda s: s.get("connections_open") == 3)
        started = time.monotonic()
        summary = proxy.stop(signal.SIGTERM)
        assert time.monotonic() - started < 5
    assert summary["connections_left_open"] == 3
    for client in clients:
        assert client.listener.disconnected.wait(10)
    [path] = proxy.files()
    assert not list(tmp_path.glob("*" + PARTIAL_SUFFIX))
    assert comments(path).count(STILL_OPEN_COMMENT) == 3
    for conn in reassemble_captures([path]):
        assert (conn.client_end, conn.server_end) == ("none", "none")
        assert conn.received.startswith(b"CONNECTED")


@pytest.mark.broker
def test_drain_lets_connections_finish(
    activemq: Broker, tmp_path: Path
) -> None:
    with capture_proxy(activemq.address, tmp_path, "--drain", "20") as proxy:
        clients = [RecordingClient(proxy.port, activemq) for _ in range(2)]
        for client in clients:
            client.connect()
        proxy.wait_for(lambda s: s.get("connections_open") == 2)
        proxy.process.send_signal(signal.SIGINT)
        time.sleep(0.5)
        started = time.monotonic()
        for client in clients:
            client.disconnect()
        # No second signal (that would hurry the proxy): it exits by itself once drained.
        assert proxy.process.wait(15) == 0, "\n".join(proxy.lines)
        summary = proxy.stop()
        assert time.monotonic() - started < 15
    assert summary["connections_left_open"] == 0
    [path] = proxy.files()
    assert STILL_OPEN_COMMENT not in comments(path)
    for conn in reassemble_captures([path]):
        assert (conn.client_end, conn.server_end) == ("fin", "fin")


def test_os_umask_does_not_widen_capture_files(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        upstream = server.getsockname()
        old = os.umask(0)
        try:
            with capture_proxy(upstream, tmp_path) as proxy:
                with socket.create_connection(("127.0.0.1", proxy.port)) as sock:
                    sock.sendall(b"x")
                    while True:  # the first accepted one is the proxy's startup check
                        peer, _ = server.accept()
                        with peer:
                            if peer.recv(1) == b"x":
                                break
                proxy.stop()
        finally:
            os.umask(old)
    [path] = proxy.files()
    assert path.stat().st_mode & 0o777 == 0o640


def _few_open_files() -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))


def test_the_open_files_limit_is_raised_for_many_clients(tmp_path: Path) -> None:
    """Started with a soft limit of 64 open files, the proxy still relays 100 clients (200
    sockets): it lifts the soft limit to the hard one."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 512:
        pytest.skip(f"hard open files limit {hard} is too low for this test")
    with (
        socket.create_server(("127.0.0.1", 0), backlog=256) as server,  # never accepts: the
        capture_proxy(server.getsockname(), tmp_path, preexec_fn=_few_open_files) as proxy,
        contextlib.ExitStack() as clients,  # kernel completes the upstream connections anyway
    ):
        limits = Path(f"/proc/{proxy.process.pid}/limits").read_text()
        [line] = [line for line in limits.splitlines() if line.startswith("Max open files")]
        soft_now, hard_now = line.split()[3:5]
        assert soft_now == hard_now != "64"
        deadline = time.monotonic() + 5  # logged just after the listening line
        while not any("open files limit" in line for line in proxy.lines):
            assert time.monotonic() < deadline, proxy.lines
            time.sleep(0.01)
        for _ in range(100):
            clients.enter_context(socket.create_connection(("127.0.0.1", proxy.port)))
        proxy.wait_for(lambda s: s.get("connections_open") == 100)
        assert proxy.stats()["upstream_failures"] == 0


def test_a_config_file_with_several_listeners(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        host, port = server.getsockname()
        config = tmp_path / "proxy.toml"
        config.write_text(
            textwrap.dedent(
                f"""
                out = "caps"
                stats_interval = 0
                check_upstream = false
                [[listener]]
                listen = "127.0.0.1:0"
                upstream = "{host}:{port}"
                [[listener]]
                listen = "[::1]:0"
                upstream = "{host}:{port}"
                """
            )
        )
        process = subprocess.Popen(
            [sys.executable, "-m", "capture", "--config", str(config)],
            cwd=REPO, stderr=subprocess.PIPE, text=True,
        )
        assert process.stderr is not None
        try:
            ports: list[tuple[str, int]] = []
            while len(ports) < 2:
                line = process.stderr.readline()
                assert line, "proxy exited"
                if match := LISTENING.search(line):
                    ports.append((match[1].strip("[]"), int(match[2])))
            for i, (listen_host, listen_port) in enumerate(ports):
                with socket.create_connection((listen_host, listen_port)) as sock:
                    sock.sendall(f"listener {i}".encode())
                    peer, _ = server.accept()
                    with peer:
                        assert peer.recv(100) == f"listener {i}".encode()
            process.send_signal(signal.SIGTERM)
            assert process.wait(20) == 0
        finally:
            if process.poll() is None:
                process.kill()
    [path] = sorted((tmp_path / "caps").glob("*.pcapng"))
    conns = reassemble_captures([path])
    assert sorted(bytes(c.sent) for c in conns) == [b"listener 0", b"listener 1"]
    assert {c.client[0] for c in conns} == {"127.0.0.1", "::1"}


# --- passcodes in crafted places, through the real proxy -------------------------------------

PASSCODE_NAMES = [
    "passcode", "PASSCODE", "Passcode", "passcode ", " passcode", "\tpasscode", "x-passcode",
    "p\\assc\\ode", "passcode\\c",
]


def _stomp_exchange(port: int, frames: list[bytes], timeout: float = 5) -> bytes:
    """Send each frame in turn, reading what the broker answers until it goes quiet or
    closes; returns all the broker sent."""
    answer = b""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(0.5)
        deadline = time.monotonic() + timeout
        for frame in frames:
            try:
                sock.sendall(frame)
            except OSError:
                break
            while time.monotonic() < deadline:
                try:
                    chunk = sock.recv(65536)
                except TimeoutError:
                    break
                except OSError:
                    return answer
                if not chunk:
                    return answer
                answer += chunk
                if chunk.endswith(b"\0\n") or chunk.endswith(b"\0"):
                    break
    return answer


def _connect_frame(broker: Broker, extra: bytes, command: bytes = b"CONNECT",
                   passcode: bytes | None = None) -> bytes:
    host = (broker.vhost or "localhost").encode()
    secret = broker.passcode.encode() if passcode is None else passcode
    return (command + b"\naccept-version:1.2\nhost:" + host + b"\nlogin:"
            + broker.login.encode() + b"\n" + extra + b"passcode:" + secret + b"\n\n\0")


@pytest.mark.broker
@pytest.mark.parametrize("kind", ["activemq", "rabbitmq"])
def test_masked_passcodes_in_crafted_places(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """With --mask-passcode no crafted placement reaches a capture file in clear: a passcode
    after 64 KiB of headers, in a second CONNECT or STOMP frame on the same connection, and
    under header names a broker could read as passcode (spaces, case, escapes)."""
    broker: Broker = request.getfixturevalue(kind)
    secrets = [b"SECRET-%02d-%s" % (i, b"x" * i) for i in range(20)]
    pad = b"".join(b"x-pad-%04d:%s\n" % (i, b"p" * 100) for i in range(640))
    assert len(pad) > 64 << 10
    connections: list[list[bytes]] = [
        [_connect_frame(broker, pad, passcode=secrets[0])],
        [_connect_frame(broker, b""), _connect_frame(broker, b"", b"STOMP", secrets[1]),
         _connect_frame(broker, b"", b"CONNECT", secrets[2])],
        [b"SEND\ndestination:/queue/x\ncontent-length:3\n\nabc\0\n"
         + _connect_frame(broker, b"", passcode=secrets[3])],
    ]
    for i, name in enumerate(PASSCODE_NAMES):
        header = name.encode() + b":" + secrets[4 + i] + b"\n"
        connections.append([_connect_frame(broker, header)])
    readings: dict[str, str] = {}
    with capture_proxy(broker.address, tmp_path, "--mask-passcode") as proxy:
        for frames in connections:
            _stomp_exchange(proxy.port, frames)
        # how the broker reads each name: the right passcode under it, and no plain one
        for name in PASSCODE_NAMES:
            frame = _connect_frame(broker, b"").replace(
                b"passcode:", name.encode() + b":", 1
            )
            answer = _stomp_exchange(proxy.port, [frame])
            readings[name] = answer.split(b"\n", 1)[0].decode() or "(closed)"
        proxy.stop()
    print(f"{kind} reads as passcode:", readings)
    files = proxy.files()
    assert files and not list(tmp_path.glob("*" + PARTIAL_SUFFIX))
    everything = b"".join(path.read_bytes() for path in files)
    for secret in secrets[: 4 + len(PASSCODE_NAMES)]:
        assert secret not in everything, secret
    assert b"*" * len(secrets[0]) in everything
    captured = reassemble_captures(files)
    assert len(captured) == len(connections) + len(PASSCODE_NAMES)
    for conn, frames in zip(captured, connections, strict=False):
        sent = b"".join(frames)
        assert len(conn.sent) <= len(sent)


# --- a disk full until the proxy stops ----------------------------------------------------------


def _echo_once(server: socket.socket) -> None:
    conn, _ = server.accept()
    with conn:
        while chunk := conn.recv(1 << 16):
            conn.sendall(chunk)
        conn.shutdown(socket.SHUT_WR)


LOST_RANGE = re.compile(r"(\d+) bytes in (\d+) records read between (\S+) and (\S+)$")


def _ns(stamp: str) -> int:
    """``format_ts``'s text back to nanoseconds since the epoch."""
    seconds, _, fraction = stamp.rstrip("Z").partition(".")
    whole = calendar.timegm(time.strptime(seconds, "%Y-%m-%dT%H:%M:%S"))
    return whole * 1_000_000_000 + int(fraction)


def test_a_disk_full_until_exit_tells_the_loss_and_exits_3(
    small_disk: SmallDisk, tmp_path: Path
) -> None:
    """The capture disk fills after start and stays full: traffic is held for
    --disk-full-wait once, then flows intact; no capture-loss block can be written, so the log
    tells the bytes and time range lost (in all and per connection and direction), the
    summary counts them as unrecorded, and the exit code is 3."""
    payload = bytes(range(256)) * 1200  # 307,200 bytes each way
    out = small_disk.mount / "caps"
    with socket.create_server(("127.0.0.1", 0)) as server:
        server_port = server.getsockname()[1]
        server_thread = threading.Thread(target=_echo_once, args=(server,))
        server_thread.start()
        with capture_proxy(
            server.getsockname(), out, "--no-upstream-check", "--disk-full-wait", "0.3"
        ) as proxy:
            small_disk.fill()
            before = time.time_ns()
            with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as client:
                port = client.getsockname()[1]
                client.sendall(payload)
                client.shutdown(socket.SHUT_WR)
                echoed = bytearray()
                while chunk := client.recv(1 << 16):
                    echoed += chunk
            after = time.time_ns()
            server_thread.join(10)
            proxy.wait_for(
                lambda s: s.get("connections_open") == 0 and s.get("disk_full_timeouts") == 1
            )
            proxy.process.send_signal(signal.SIGTERM)
            assert proxy.process.wait(20) == 3, "\n".join(proxy.lines)
            time.sleep(0.05)  # let the reader thread take the last lines
    assert echoed == payload
    [summary_line] = [line for line in proxy.lines if " summary " in line]
    summary = parse_stats_line(summary_line.split(" INFO ", 1)[1])
    forwarded = summary["bytes_client_to_server"] + summary["bytes_server_to_client"]
    assert forwarded == 2 * len(payload)
    assert summary["bytes_captured"] == 0 and summary["bytes_dropped"] == forwarded
    assert summary["bytes_loss_recorded"] == 0 and summary["bytes_loss_unrecorded"] == forwarded
    assert (summary["disk_full_waits"], summary["disk_full_timeouts"]) == (1, 1)
    told = [line for line in proxy.lines if "capture loss recorded in no file" in line]
    match = LOST_RANGE.search(told[0])
    assert match is not None, told
    assert int(match[1]) == forwarded
    assert before <= _ns(match[3]) <= _ns(match[4]) <= after
    flow = f"client=127.0.0.1:{port} server=127.0.0.1:{server_port}"
    for direction in ("client_to_server", "server_to_client"):
        [line] = [line for line in told if f"{flow} direction={direction} " in line]
        assert f"reason=write_failed bytes={len(payload)} " in line
    assert any("recorded in no capture file" in line for line in proxy.lines)
    assert list(out.iterdir()) == []


# --- bulk in lossless mode ----------------------------------------------------------------------

BULK_EACH_WAY = 1_000_000_000  # 2 GB through the proxy, as in benchmarks/bench_proxy.py
BULK_DEADLINE_S = 180


def _pump(sock: socket.socket, total: int, received: list[int]) -> None:
    """Send ``total`` bytes while receiving ``total`` bytes on ``sock`` (two threads)."""
    chunk = bytes(range(256)) * 4096  # 1 MiB

    def send() -> None:
        left = total
        while left:
            left -= sock.send(memoryview(chunk)[: min(left, len(chunk))])
        sock.shutdown(socket.SHUT_WR)

    sender = threading.Thread(target=send)
    sender.start()
    buf = bytearray(1 << 20)
    count = 0
    while (n := sock.recv_into(buf)) > 0:
        count += n
    sender.join()
    received.append(count)


@pytest.mark.slow
def test_a_2_gb_bulk_transfer_loses_no_capture_byte_in_lossless_mode(tmp_path: Path) -> None:
    """1 GB each way at once over one connection through the proxy with the default settings
    (lossless, 64 MiB buffer): every byte forwarded is in the capture, none dropped, no
    capture-loss record; the pipeline's reader sees 1 GB of payload each way."""
    received: list[int] = []
    with socket.create_server(("127.0.0.1", 0)) as server:
        out = tmp_path / "caps"
        server_port = server.getsockname()[1]

        def serve() -> None:
            conn, _ = server.accept()
            with conn:
                _pump(conn, BULK_EACH_WAY, received)

        server_thread = threading.Thread(target=serve)
        server_thread.start()
        # no upstream check: its probe connection would be the one the server accepts
        with capture_proxy(
            server.getsockname(), out, "--stats-interval", "0", "--no-upstream-check"
        ) as proxy:
            started = time.monotonic()
            with socket.create_connection(("127.0.0.1", proxy.port)) as client:
                _pump(client, BULK_EACH_WAY, received)
            server_thread.join(BULK_DEADLINE_S)
            elapsed = time.monotonic() - started
            summary = proxy.stop()
    assert received == [BULK_EACH_WAY, BULK_EACH_WAY]
    assert elapsed < BULK_DEADLINE_S
    assert summary["bytes_dropped"] == 0
    assert summary["bytes_captured"] == 2 * BULK_EACH_WAY
    print(f"{2 * BULK_EACH_WAY / 1e9:g} GB through the proxy in {elapsed:.1f} s: {summary}")
    payload = {True: 0, False: 0}
    for path in proxy.files():
        with CaptureReader(str(path)) as reader:
            for item in reader:
                assert isinstance(item, TcpPacket), item  # no anomaly, no capture_loss
                payload[item.src_port == server_port] += item.payload_len
    assert payload == {True: BULK_EACH_WAY, False: BULK_EACH_WAY}


def test_version_and_quiet_or_verbose() -> None:
    version = run_cli("--version")
    assert version.returncode == 0 and re.fullmatch(r"stomp-capture \S+\n", version.stdout)
    shown = run_cli("--help").stdout
    assert "-q, --quiet" in shown and "-v, --verbose" in shown
    both = run_cli("-q", "-v")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
