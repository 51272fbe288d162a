"""Real Debian STOMP brokers (ActiveMQ, RabbitMQ) on loopback, for tests and sample captures.

Each broker runs from a private work folder with its own config, data and logs, on a free
port, and is always stopped when the context manager exits.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ACTIVEMQ_JAR = Path("/usr/share/activemq/bin/activemq.jar")
ACTIVEMQ_HOME = Path("/usr/share/activemq")
RABBITMQ_BIN = Path("/usr/lib/rabbitmq/bin")
RABBITMQ_PLUGINS_GLOB = "/usr/lib/rabbitmq/lib/rabbitmq_server-*/plugins/rabbitmq_stomp-*"

KINDS = ("activemq", "rabbitmq")
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0

# Flags the upstream ActiveMQ 5.17 start script passes on Java 9+.
JAVA17_FLAGS = (
    "--add-reads=java.xml=java.logging",
    "--add-opens=java.base/java.security=ALL-UNNAMED",
    "--add-opens=java.base/java.net=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.naming/javax.naming.spi=ALL-UNNAMED",
    "--add-opens=java.rmi/sun.rmi.transport.tcp=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
    "--add-exports=java.base/sun.net.www.protocol.http=ALL-UNNAMED",
    "--add-exports=java.base/sun.net.www.protocol.https=ALL-UNNAMED",
    "--add-exports=java.base/sun.net.www.protocol.jar=ALL-UNNAMED",
)

ACTIVEMQ_XML = """\
<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans
  http://www.springframework.org/schema/beans/spring-beans.xsd
  http://activemq.apache.org/schema/core
  http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="stomp-lake-test"
          useJmx="false" persistent="false" schedulerSupport="false"
          dataDirectory="{data}">
    <plugins>
      <simpleAuthenticationPlugin>
        <users>
          <authenticationUser username="{login}" password="{passcode}" groups="admins"/>
        </users>
      </simpleAuthenticationPlugin>
    </plugins>{ssl_context}
    <transportConnectors>
      <!-- tests/capture/test_load.py holds 1,000 connections open at once -->
      <transportConnector name="stomp" uri="stomp://{host}:{port}?maximumConnections=10000"/>{tls_connector}
    </transportConnectors>
  </broker>
</beans>
"""

# ActiveMQ's stomp+ssl connector and its key stores (scripts/make_tls_captures.py)
ACTIVEMQ_SSL_CONTEXT = """
    <sslContext>
      <sslContext keyStore="file:{keystore}" keyStorePassword="{password}"
                  trustStore="file:{truststore}" trustStorePassword="{password}"/>
    </sslContext>"""
ACTIVEMQ_TLS_CONNECTOR = """
      <transportConnector name="stomp+ssl" uri="stomp+ssl://{host}:{port}"/>"""


def activemq_xml(broker: Broker, data: Path, ssl_context: str = "", tls_connector: str = "") -> str:
    return ACTIVEMQ_XML.format(
        data=data,
        login=broker.login,
        passcode=broker.passcode,
        host=broker.host,
        port=broker.stomp_port,
        ssl_context=ssl_context,
        tls_connector=tls_connector,
    )


ACTIVEMQ_LOG4J = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=%d %-5p [%c{{1}}] %m%n
"""

RABBITMQ_CONF = """\
listeners.tcp = none
stomp.listeners.tcp.1 = {host}:{port}
web_stomp.tcp.ip = {host}
web_stomp.tcp.port = {web_port}
"""


@dataclass(frozen=True, slots=True)
class Broker:
    kind: str
    host: str
    stomp_port: int
    login: str
    passcode: str
    vhost: str | None
    # STOMP over WebSocket (RabbitMQ's rabbitmq_web_stomp, path /ws); None when not served
    web_port: int | None = None

    @property
    def address(self) -> tuple[str, int]:
        return (self.host, self.stomp_port)


@dataclass(slots=True)
class _Launch:
    argv: list[str]
    env: dict[str, str]
    log: Path


def broker_available(kind: str) -> str | None:
    """None when `kind` can run here, else the reason it cannot."""
    if kind == "activemq":
        if not ACTIVEMQ_JAR.is_file():
            return f"{ACTIVEMQ_JAR} missing: install the Debian package 'activemq'"
        if shutil.which("java") is None:
            return "java missing: install the Debian package 'openjdk-17-jre-headless'"
        return None
    if kind == "rabbitmq":
        if not (RABBITMQ_BIN / "rabbitmq-server").is_file():
            return "rabbitmq-server missing: install the Debian package 'rabbitmq-server'"
        if not glob.glob(RABBITMQ_PLUGINS_GLOB):
            return "the rabbitmq_stomp plugin is missing from the rabbitmq-server install"
        return None
    return f"unknown broker kind {kind!r}; expected one of {KINDS}"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def stomp_handshake(broker: Broker, timeout: float = 2.0) -> bytes:
    """Send one STOMP 1.2 CONNECT and return the first frame the broker answers with."""
    headers = [
        "CONNECT",
        "accept-version:1.2",
        f"host:{broker.vhost or broker.host}",
        f"login:{broker.login}",
        f"passcode:{broker.passcode}",
    ]
    request = ("\n".join(headers) + "\n\n\0").encode()
    with socket.create_connection(broker.address, timeout=timeout) as sock:
        sock.sendall(request)
        answer = b""
        while b"\0" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
        with contextlib.suppress(OSError):
            sock.sendall(b"DISCONNECT\n\n\0")
        return answer.split(b"\0", 1)[0]


def _activemq_launch(broker: Broker, workdir: Path) -> _Launch:
    conf, data = workdir / "conf", workdir / "data"
    conf.mkdir(parents=True, exist_ok=True)
    data.mkdir(parents=True, exist_ok=True)
    log = workdir / "activemq.log"
    (conf / "activemq.xml").write_text(activemq_xml(broker, data))
    (conf / "log4j.properties").write_text(ACTIVEMQ_LOG4J.format(log=log))
    argv = [
        "java",
        *JAVA17_FLAGS,
        "-Xms64m",
        "-Xmx512m",
        "-Djava.awt.headless=true",
        f"-Dactivemq.home={ACTIVEMQ_HOME}",
        f"-Dactivemq.base={workdir}",
        f"-Dactivemq.conf={conf}",
        f"-Dactivemq.data={data}",
        f"-Dlog4j.configuration=file:{conf / 'log4j.properties'}",
        "-jar",
        str(ACTIVEMQ_JAR),
        "start",
        f"xbean:file:{conf / 'activemq.xml'}",
    ]
    return _Launch(argv=argv, env=dict(os.environ), log=workdir / "stdout.log")


def _rabbitmq_launch(broker: Broker, workdir: Path) -> _Launch:
    home, mnesia, logs = workdir / "home", workdir / "mnesia", workdir / "log"
    for folder in (home, mnesia, logs):
        folder.mkdir(parents=True, exist_ok=True)
    (workdir / "rabbitmq.conf").write_text(
        RABBITMQ_CONF.format(host=broker.host, port=broker.stomp_port, web_port=broker.web_port)
    )
    # The same file `rabbitmq-plugins --offline enable rabbitmq_stomp rabbitmq_web_stomp` writes.
    (workdir / "enabled_plugins").write_text("[rabbitmq_stomp,rabbitmq_web_stomp].\n")
    env = dict(os.environ)
    env.update(
        HOME=str(home),
        RABBITMQ_NODENAME=f"stomplake{broker.stomp_port}@localhost",
        RABBITMQ_NODE_IP_ADDRESS=broker.host,
        RABBITMQ_DIST_PORT=str(free_port()),
        RABBITMQ_MNESIA_BASE=str(mnesia),
        RABBITMQ_LOG_BASE=str(logs),
        RABBITMQ_ENABLED_PLUGINS_FILE=str(workdir / "enabled_plugins"),
        RABBITMQ_CONFIG_FILE=str(workdir / "rabbitmq.conf"),
        # Point these away from /etc/rabbitmq so a host install cannot leak in.
        RABBITMQ_CONF_ENV_FILE=str(workdir / "rabbitmq-env.conf"),
        RABBITMQ_ADVANCED_CONFIG_FILE=str(workdir / "advanced.config"),
    )
    # Bypass /usr/sbin's wrapper, which switches to the rabbitmq user and /var/lib/rabbitmq.
    argv = [str(RABBITMQ_BIN / "rabbitmq-server")]
    return _Launch(argv=argv, env=env, log=workdir / "stdout.log")


LAUNCHERS: dict[str, Callable[[Broker, Path], _Launch]] = {
    "activemq": _activemq_launch,
    "rabbitmq": _rabbitmq_launch,
}


def _default_broker(kind: str, port: int) -> Broker:
    if kind == "activemq":
        return Broker(kind, "127.0.0.1", port, login="admin", passcode="admin", vhost=None)
    return Broker(
        kind, "127.0.0.1", port, login="guest", passcode="guest", vhost="/", web_port=free_port()
    )


def _log_tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _wait_ready(broker: Broker, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    last_error = "no answer yet"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"{broker.kind} exited with code {process.returncode} before answering STOMP;"
                f" log tail:\n{_log_tail(log)}"
            )
        try:
            answer = stomp_handshake(broker)
            if answer.startswith(b"CONNECTED"):
                if broker.web_port is not None:  # web-stomp may start after STOMP
                    socket.create_connection((broker.host, broker.web_port), 2).close()
                return
            last_error = f"unexpected answer {answer[:200]!r}"
        except OSError as error:
            last_error = str(error)
        time.sleep(0.25)
    raise TimeoutError(
        f"{broker.kind} on port {broker.stomp_port} did not answer CONNECTED within"
        f" {START_TIMEOUT_S:.0f} s ({last_error}); log tail:\n{_log_tail(log)}"
    )


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the broker's process group (both brokers stop cleanly on it), then SIGKILL."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    # Children (erl_child_setup, inet_gethost) share the group; make sure none linger.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


@contextlib.contextmanager
def running_broker(
    kind: str, *, stomp_port: int | None = None, workdir: Path | None = None
) -> Iterator[Broker]:
    """Start `kind` on loopback, yield once it answers CONNECTED, always stop it.

    Without `workdir` a temporary folder is used and removed afterwards; a given
    `workdir` is kept (its `stdout.log` and broker logs help debugging).
    """
    reason = broker_available(kind)
    if reason is not None:
        raise RuntimeError(f"cannot start {kind}: {reason}")
    broker = _default_broker(kind, stomp_port or free_port())
    own_workdir = workdir is None
    folder = Path(tempfile.mkdtemp(prefix=f"stomp-lake-{kind}-")) if workdir is None else workdir
    folder.mkdir(parents=True, exist_ok=True)
    launch = LAUNCHERS[kind](broker, folder.resolve())
    try:
        with launch.log.open("wb") as log_file:
            process = subprocess.Popen(
                launch.argv,
                cwd=folder,
                env=launch.env,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            _wait_ready(broker, process, launch.log)
            yield broker
        finally:
            _stop(process)
    finally:
        if own_workdir:
            shutil.rmtree(folder, ignore_errors=True)


@dataclass(slots=True)
class _SharedBroker:
    broker: Broker
    stack: contextlib.ExitStack
    users: int = 0


# A fixture imported into several test modules gets one FixtureDef per module; sharing the
# running broker here keeps it to one broker of each kind per test session.
_SHARED: dict[str, _SharedBroker] = {}


def _broker_fixture(kind: str) -> Iterator[Broker]:
    reason = broker_available(kind)
    if reason is not None:
        pytest.fail(f"{kind} broker needed by this test cannot run: {reason}", pytrace=False)
    shared = _SHARED.get(kind)
    if shared is None:
        stack = contextlib.ExitStack()
        broker = stack.enter_context(running_broker(kind))
        shared = _SHARED[kind] = _SharedBroker(broker, stack)
    shared.users += 1
    try:
        yield shared.broker
    finally:
        shared.users -= 1
        if shared.users == 0:
            del _SHARED[kind]
            shared.stack.close()


@pytest.fixture(scope="session")
def activemq() -> Iterator[Broker]:
    """A running ActiveMQ (login admin/admin, no vhost) shared by the whole test session."""
    yield from _broker_fixture("activemq")


@pytest.fixture(scope="session")
def rabbitmq() -> Iterator[Broker]:
    """A running RabbitMQ with rabbitmq_stomp (login guest/guest, host header "/")."""
    yield from _broker_fixture("rabbitmq")
