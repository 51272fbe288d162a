"""stomp-capture on loopback: bulk throughput against socat and the disk's own write speed,
small-frame round trips, 10,000 connections at once.

In the same run, against the same endpoints:
- bulk: GB bytes each way at once over one connection, direct, through socat (Debian) as a
  plain relay (default and 256 KiB buffers), through stomp-capture without and with capture
  (default lossless mode, and --capture-mode drop, whose loss is checked against the
  capture-loss blocks in the files);
  every byte is checked (count, and an offset pattern at both ends of every chunk read);
- disk: the sequential write speed of the capture folder's filesystem (fio if installed,
  else ``dd bs=1M conv=fdatasync``), as much as one capture run writes; lossless capture is
  compared with it, both on the traffic's time and on the time until the capture is on disk
  (the proxy's exit, after its last fdatasync), which is what dd's figure includes;
- latency: small STOMP frames at RATE messages a second to an echo server, round trip time
  direct and through stomp-capture (capture on): p50 / p99;
- connections: CONNECTIONS clients (asyncio, loopback) held open at once through
  stomp-capture with capture on, each echoing before and after the hold; the proxy's RSS and
  descriptors while they are open; every connection and byte checked in the capture. The
  proxy raises its soft open files limit to the hard one; the benchmark raises the hard one
  to 65,536 where it may (root with CAP_SYS_RESOURCE). Where the hard limit is too low, the
  clients past the proxy's room wait in its backlog and go through when the first close.

Each bulk case runs --repeat times (2) and the best run is reported. Targets: throughput >=
0.7x socat's; lossless capture >= 0.8x the disk's write speed with nothing dropped; added
p99 round trip <= 0.5 ms; no byte lost; capture complete by default. Writes
DIR/proxy.md and DIR/proxy.json (DIR defaults to benchmarks/results).

    .venv/bin/python -m benchmarks.bench_proxy [--gb 1] [--out DIR]
"""

from __future__ import annotations

import argparse
import array
import asyncio
import json
import mmap
import multiprocessing
import os
import platform
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "benchmarks" / "results"
CHUNK = 1 << 20
PATTERN_WORDS = (1 << 19) + 3  # period of the offset pattern, not a power of two
PATTERN_BYTES = PATTERN_WORDS * 8
FRAME = (
    b"SEND\ndestination:/queue/latency\ncontent-type:text/plain\ncontent-length:10\n\n0123456789\0"
)
LISTENING = re.compile(r"listening on \S+:(\d+) -> upstream")
STATS = re.compile(r" (stats|summary) (.*)$")
TARGET_RATIO = 0.7
DROP_MODE = "stomp-capture, capture on, --capture-mode drop"
LOSS_TAG = b"stomp-capture capture_loss "
LOSS_BYTES = re.compile(rb" bytes=(\d+)")
TARGET_ADDED_P99_MS = 0.5
TARGET_DISK_SHARE = 0.8
CAPTURE_ON = "stomp-capture, capture on"
PROXY_OPEN_FILES = 65_536
CONNECTING_AT_ONCE = 500
ROOM = re.compile(r"up to (\d+) connections at once")

_pattern: memoryview | None = None


def pattern() -> memoryview:
    """Word i of the stream (8 bytes, native order) holds i mod PATTERN_WORDS."""
    global _pattern
    if _pattern is None:
        words = array.array("Q", range(PATTERN_WORDS)).tobytes()
        _pattern = memoryview(words + words[:CHUNK])
    return _pattern


def _word_ok(buf: memoryview, index: int, stream_offset: int) -> bool:
    expected = ((stream_offset + index) // 8) % PATTERN_WORDS
    return int.from_bytes(buf[index : index + 8], sys.byteorder) == expected


def check_chunk(buf: memoryview, length: int, stream_offset: int) -> bool:
    """The first and last whole words of a chunk sit at the right stream offset, so any lost,
    repeated or reordered byte shows up at the next chunk read."""
    first = -stream_offset % 8
    last = (stream_offset + length) // 8 * 8 - 8 - stream_offset
    if first + 8 > length:
        return True
    return _word_ok(buf, first, stream_offset) and _word_ok(buf, last, stream_offset)


# --- bulk -------------------------------------------------------------------------------------


@dataclass(slots=True)
class PeerResult:
    sent: int
    received: int
    intact: bool
    started: float
    finished: float


def bulk_peer(sock: socket.socket, total: int) -> PeerResult:
    """Send ``total`` pattern bytes and receive until EOF, both at once."""
    data = pattern()
    started = time.monotonic()

    def send() -> None:
        offset = 0
        while offset < total:
            size = min(CHUNK, total - offset)
            start = offset % PATTERN_BYTES
            sock.sendall(data[start : start + size])
            offset += size
        sock.shutdown(socket.SHUT_WR)

    sender = threading.Thread(target=send)
    sender.start()
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    received, intact = 0, True
    while n := sock.recv_into(buf):
        intact = intact and check_chunk(view, n, received)
        received += n
    finished = time.monotonic()
    sender.join()
    sock.close()
    return PeerResult(total, received, intact, started, finished)


def _bulk_server(listener: socket.socket, total: int, results: multiprocessing.Queue) -> None:
    conn, _ = listener.accept()
    results.put(("server", bulk_peer(conn, total)))


def _bulk_client(port: int, total: int, results: multiprocessing.Queue) -> None:
    sock = socket.create_connection(("127.0.0.1", port))
    results.put(("client", bulk_peer(sock, total)))


@dataclass(slots=True)
class BulkRun:
    seconds: float
    bytes_each_way: int
    intact: bool
    mb_per_s_total: float


def run_bulk(total: int, through: Callable[[int], AbstractContextManager[int]]) -> BulkRun:
    """One bulk transfer; ``through(server_port)`` yields the port the client should use."""
    ctx = multiprocessing.get_context("fork")
    listener = socket.create_server(("127.0.0.1", 0), backlog=16)
    results: multiprocessing.Queue = ctx.Queue()
    server = ctx.Process(target=_bulk_server, args=(listener, total, results))
    server.start()
    with through(listener.getsockname()[1]) as port:
        client = ctx.Process(target=_bulk_client, args=(port, total, results))
        client.start()
        got = dict(results.get(timeout=600) for _ in range(2))
        client.join()
    server.join()
    listener.close()
    c, s = got["client"], got["server"]
    intact = c.intact and s.intact and c.received == s.sent == s.received == c.sent == total
    seconds = max(c.finished, s.finished) - c.started
    return BulkRun(seconds, total, intact, 2 * total / seconds / 1e6)


@contextmanager
def direct(server_port: int) -> Iterator[int]:
    yield server_port


def _listening(port: int) -> bool:
    """Whether something listens on ``port`` (state 0A in /proc/net/tcp), without connecting."""
    hex_port = f"{port:04X}"
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f:
                fields = line.split()
                if len(fields) > 3 and fields[1].rpartition(":")[2] == hex_port and (
                    fields[3] == "0A"
                ):
                    return True
    return False


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def socat_relay(buffer: int | None) -> Callable[[int], AbstractContextManager[int]]:
    @contextmanager
    def through(server_port: int) -> Iterator[int]:
        port = _free_port()
        argv = ["socat"] + (["-b", str(buffer)] if buffer else [])
        argv += [f"TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr", f"TCP:127.0.0.1:{server_port}"]
        process = subprocess.Popen(argv)
        try:
            deadline = time.monotonic() + 10
            while not _listening(port):  # probing by connecting would use up its one accept
                if time.monotonic() > deadline:
                    raise RuntimeError("socat did not start listening")
                time.sleep(0.01)
            yield port
        finally:
            process.wait(timeout=30)  # it exits when its one connection ends

    return through


@dataclass
class ProxyProcess:
    process: subprocess.Popen[str]
    port: int
    lines: list[str] = field(default_factory=list)
    exited: float = 0.0

    def counters(self, label: str = "stats") -> dict[str, int]:
        for line in reversed(list(self.lines)):
            match = STATS.search(line)
            if match and match[1] == label:
                return {k: int(v) for k, _, v in (f.partition("=") for f in match[2].split())}
        return {}

    def rss_mb(self) -> float:
        with open(f"/proc/{self.process.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def stop(self) -> dict[str, int]:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)
        self.exited = time.monotonic()
        time.sleep(0.1)
        return self.counters("summary")

    def open_fds(self) -> int:
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))

    def room(self) -> int:
        """How many connections the proxy said it takes at once."""
        for line in list(self.lines):
            if match := ROOM.search(line):
                return int(match[1])
        return 0


@contextmanager
def stomp_capture(
    upstream_port: int,
    out: Path | None,
    *extra: str,
    preexec_fn: Callable[[], None] | None = None,
) -> Iterator[ProxyProcess]:
    argv = [
        sys.executable,
        "-m",
        "capture",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        f"127.0.0.1:{upstream_port}",
        "--no-upstream-check",
        "--stats-interval",
        "0.5",
        *extra,
    ]
    argv += ["--out", str(out)] if out is not None else ["--no-capture"]
    process = subprocess.Popen(
        argv, cwd=REPO, stderr=subprocess.PIPE, text=True, preexec_fn=preexec_fn
    )
    assert process.stderr is not None
    lines: list[str] = []
    port = None
    while port is None:
        line = process.stderr.readline()
        if not line:
            raise RuntimeError("stomp-capture did not start:\n" + "\n".join(lines))
        lines.append(line.rstrip())
        if match := LISTENING.search(line):
            port = int(match[1])

    def collect() -> None:
        for rest in process.stderr:  # type: ignore[union-attr]
            lines.append(rest.rstrip())

    threading.Thread(target=collect, daemon=True).start()
    proxy = ProxyProcess(process, port, lines)
    try:
        yield proxy
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def loss_recorded(folder: Path) -> int:
    """Bytes the capture files of ``folder`` record as lost (their capture-loss blocks)."""
    total = 0
    for path in folder.glob("*.pcapng"):
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as view:
            pos = view.find(LOSS_TAG)
            while pos >= 0:
                match = LOSS_BYTES.search(view[pos : pos + 300])
                total += int(match[1]) if match else 0
                pos = view.find(LOSS_TAG, pos + 1)
    return total


def proxy_relay(
    capture_dir: Path | None, summaries: list[dict[str, int]], *extra: str
) -> Callable[[int], AbstractContextManager[int]]:
    @contextmanager
    def through(server_port: int) -> Iterator[int]:
        run_dir = Path(tempfile.mkdtemp(dir=capture_dir)) if capture_dir else None
        try:
            with stomp_capture(server_port, run_dir, *extra) as proxy:
                started = time.monotonic()
                yield proxy.port
                summary = proxy.stop()
            if run_dir is not None:
                summary["loss_recorded_bytes"] = loss_recorded(run_dir)
                summary["file_bytes"] = sum(p.stat().st_size for p in run_dir.glob("*.pcapng"))
                # from the client's start to the proxy's exit, after its last fdatasync
                summary["on_disk_ms"] = round((proxy.exited - started) * 1000)
            summaries.append(summary)
        finally:
            if run_dir is not None:
                shutil.rmtree(run_dir, ignore_errors=True)

    return through


# --- the disk's own write speed ----------------------------------------------------------------


@dataclass(slots=True)
class DiskRun:
    tool: str
    bytes_written: int
    seconds: float
    mb_per_s: float


def disk_write_speed(folder: Path, size: int) -> DiskRun:
    """Sequentially write ``size`` bytes to a file in ``folder`` and sync them (the time
    includes the sync): fio if installed, else dd."""
    target = folder / "disk-speed.bin"
    mib = max(1, size >> 20)
    try:
        if shutil.which("fio"):
            argv = ["fio", "--name=seqwrite", f"--filename={target}", "--rw=write", "--bs=1M",
                    f"--size={mib}M", "--end_fsync=1", "--ioengine=psync", "--output-format=json"]
            started = time.monotonic()
            report = json.loads(subprocess.run(argv, capture_output=True, check=True).stdout)
            seconds = time.monotonic() - started
            job = report["jobs"][0]["write"]
            written = int(job["io_bytes"])
            seconds = min(seconds, (job["runtime"] or seconds * 1000) / 1000 or seconds)
            tool = f"fio --rw=write --bs=1M --size={mib}M --end_fsync=1"
        else:
            argv = ["dd", "if=/dev/zero", f"of={target}", "bs=1M", f"count={mib}",
                    "conv=fdatasync"]
            started = time.monotonic()
            subprocess.run(argv, capture_output=True, check=True)
            seconds = time.monotonic() - started
            written = mib << 20
            tool = f"dd bs=1M count={mib} conv=fdatasync"
    finally:
        target.unlink(missing_ok=True)
    return DiskRun(tool, written, seconds, written / seconds / 1e6)


# --- echo server for latency and held connections ----------------------------------------------


class _Echo(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.transport.write(data)  # type: ignore[attr-defined]


def _echo_server(listener: socket.socket) -> None:
    async def serve() -> None:
        server = await asyncio.get_running_loop().create_server(_Echo, sock=listener)
        await server.serve_forever()

    try:
        import uvloop

        uvloop.run(serve())
    except ImportError:
        asyncio.run(serve())


@contextmanager
def echo_server() -> Iterator[int]:
    listener = socket.create_server(("127.0.0.1", 0), backlog=4096)
    process = multiprocessing.get_context("fork").Process(target=_echo_server, args=(listener,))
    process.start()
    try:
        yield listener.getsockname()[1]
    finally:
        process.terminate()
        process.join()
        listener.close()


def _round_trip(sock: socket.socket, frame: bytes) -> None:
    sock.sendall(frame)
    got = 0
    while got < len(frame):
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("echo connection closed")
        got += len(chunk)


@dataclass(slots=True)
class Latency:
    messages: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float


def _latency(samples: list[float]) -> Latency:
    q = statistics.quantiles(samples, n=100, method="inclusive")
    return Latency(len(samples), statistics.median(samples), q[89], q[98], max(samples))


def measure_latency(ports: dict[str, int], messages: int, rate: float) -> dict[str, Latency]:
    """Round trips on every path in turn, each path paced at ``rate``: the paths see the
    same moments of a shared machine's load, so their difference is the proxy's."""
    socks = {name: socket.create_connection(("127.0.0.1", port)) for name, port in ports.items()}
    samples: dict[str, list[float]] = {name: [] for name in ports}
    try:
        for sock in socks.values():
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for _ in range(50):  # warm up
                _round_trip(sock, FRAME)
        interval = 1.0 / rate
        next_at = time.perf_counter()
        for _ in range(messages):
            next_at += interval
            delay = next_at - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            for name, sock in socks.items():
                started = time.perf_counter_ns()
                _round_trip(sock, FRAME)
                samples[name].append((time.perf_counter_ns() - started) / 1e6)
    finally:
        for sock in socks.values():
            sock.close()
    return {name: _latency(values) for name, values in samples.items()}


@dataclass(slots=True)
class HeldConnections:
    connections: int
    room: int  # connections the proxy said it takes at once (open files limit)
    proxy_hard_limit: int
    connect_and_echo_s: float
    held_s: float
    held_at_once: int  # the proxy's connections_open during the hold
    alive_after_hold: int  # of those held, echoing again after the hold
    all_echoed: int  # clients whose frame came back (the waiting ones once let through)
    proxy_rss_mb: float
    proxy_open_fds: int
    closed_afterwards: bool
    accept_limit_waits: int = 0
    accept_failures: int = 0
    upstream_failures: int = 0
    captured_connections: int = 0
    captured_bytes_ok: bool = False


async def _hold(
    proxy: ProxyProcess, count: int, room: int, hold_seconds: float
) -> tuple[HeldConnections, dict[int, int]]:
    connecting = asyncio.Semaphore(CONNECTING_AT_ONCE)
    streams: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    echoed: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    sent: dict[int, int] = {}  # client port: bytes sent (and echoed)

    async def one() -> None:
        async with connecting:
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            streams.append((reader, writer))
            writer.write(FRAME)
        await reader.readexactly(len(FRAME))
        sent[writer.get_extra_info("sockname")[1]] = len(FRAME)
        echoed.append((reader, writer))

    async def again(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> int:
        writer.write(FRAME)
        try:
            await reader.readexactly(len(FRAME))
        except (asyncio.IncompleteReadError, ConnectionError):
            return 0
        sent[writer.get_extra_info("sockname")[1]] += len(FRAME)
        return 1

    started = time.monotonic()
    at_once = min(room, count)
    clients = asyncio.gather(*(one() for _ in range(count)))
    while len(echoed) < at_once or proxy.counters().get("connections_open", 0) < at_once:
        await asyncio.sleep(0.05)
    ready = time.monotonic() - started
    await asyncio.sleep(hold_seconds)
    open_now = proxy.counters().get("connections_open", -1)
    rss, fds = proxy.rss_mb(), proxy.open_fds()
    held = list(echoed)
    alive = sum(await asyncio.gather(*(again(r, w) for r, w in held)))
    for _, writer in held[: count - at_once]:  # make room for the ones waiting, if any
        writer.close()
    await clients
    for _, writer in streams:
        writer.close()
    await asyncio.gather(*(w.wait_closed() for _, w in streams), return_exceptions=True)
    deadline = time.monotonic() + 30
    while proxy.counters().get("connections_open") != 0 and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    closed = proxy.counters().get("connections_open") == 0
    held_result = HeldConnections(
        count, room, 0, ready, hold_seconds, open_now, alive, len(echoed), rss, fds, closed
    )
    return held_result, sent


def raise_own_open_files_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def proxy_hard_limit() -> int:
    """PROXY_OPEN_FILES where this process may raise the hard limit, else its own."""
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (before[0], PROXY_OPEN_FILES))
    except (OSError, ValueError):
        return before[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, before)
    return PROXY_OPEN_FILES


def captured_connections(folder: Path, sent: dict[int, int]) -> tuple[int, bool]:
    """Connections in the capture files of ``folder`` (the pipeline's reader and reassembly),
    and whether each client's connection holds the bytes it sent, each way."""
    from pipeline.reassembly import Data, Opened, Segment
    from tests.support.local_reassembly import LocalReassembly

    by_id: dict[str, int] = {}
    sizes: dict[tuple[int, bool], int] = {}
    for event in LocalReassembly(sorted(str(p) for p in folder.glob("*.pcapng"))):
        if isinstance(event, Opened):
            by_id[event.connection.connection_id] = event.connection.client[1]
        elif isinstance(event, Segment) and isinstance(event.event, Data):
            key = (by_id[event.connection_id], event.from_client)
            sizes[key] = sizes.get(key, 0) + len(event.event.data)
    expected = {(port, side): size for port, size in sent.items() for side in (True, False)}
    return len(by_id), all(sizes.get(key) == size for key, size in expected.items())


def hold_connections(echo_port: int, folder: Path, count: int, hold: float) -> HeldConnections:
    """``count`` clients through a capturing proxy allowed ``count`` connections, whose soft
    open files limit starts at 1024 under the highest hard limit the benchmark can give."""
    raise_own_open_files_limit(count + 1000)
    hard = proxy_hard_limit()

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))

    with stomp_capture(
        echo_port, folder, "--max-connections", str(count), preexec_fn=limits
    ) as proxy:
        deadline = time.monotonic() + 10
        while not proxy.room():
            if time.monotonic() > deadline:
                raise RuntimeError("stomp-capture did not say its room:\n" + "\n".join(
                    proxy.lines))
            time.sleep(0.01)
        held, sent = asyncio.run(_hold(proxy, count, proxy.room(), hold))
        summary = proxy.stop()
    held.proxy_hard_limit = hard
    held.accept_limit_waits = summary.get("accept_limit_waits", -1)
    held.accept_failures = summary.get("accept_failures", -1)
    held.upstream_failures = summary.get("upstream_failures", -1)
    held.captured_connections, held.captured_bytes_ok = captured_connections(folder, sent)
    return held


# --- the run --------------------------------------------------------------------------------------


def best_run(runs: list[BulkRun]) -> BulkRun:
    return min(runs, key=lambda r: r.seconds)


def environment() -> dict[str, str]:
    try:
        import uvloop

        loop = f"uvloop {uvloop.__version__}"
    except ImportError:
        loop = "asyncio"
    socat = subprocess.run(["socat", "-V"], capture_output=True, text=True).stdout
    version = re.search(r"socat version (\S+)", socat)
    return {
        "python": platform.python_version(),
        "event_loop": loop,
        "cpus": str(os.cpu_count()),
        "kernel": platform.release(),
        "socat": version[1] if version else "?",
    }


def disk_share(summaries: list[dict[str, int]], runs: list[BulkRun], disk: list[DiskRun]) -> dict:
    """Lossless capture against the disk: capture file MB/s on the traffic's time and until
    the capture was on disk, best run, each as a share of the disk's best write speed; and
    each run's until-on-disk share of the disk measured right before it."""
    disk_mb_s = max(d.mb_per_s for d in disk)
    rates = [
        (s["file_bytes"] / r.seconds / 1e6, s["file_bytes"] / (s["on_disk_ms"] / 1000) / 1e6)
        for s, r in zip(summaries, runs, strict=True)
        if s.get("file_bytes") and s.get("on_disk_ms")
    ]
    traffic = max((t for t, _ in rates), default=0.0)
    on_disk = max((d for _, d in rates), default=0.0)
    return {
        "share_per_run": [
            round(d / run.mb_per_s, 3) for (_, d), run in zip(rates, disk, strict=True)
        ],
        "capture_file_mb_per_s_traffic_time": round(traffic, 1),
        "capture_file_mb_per_s_until_on_disk": round(on_disk, 1),
        "share_traffic_time": round(traffic / disk_mb_s, 3),
        "share_until_on_disk": round(on_disk / disk_mb_s, 3),
    }


def run(args: argparse.Namespace) -> dict[str, object]:
    total = int(args.gb * 1e9)
    load_before = os.getloadavg()[0]
    capture_dir = Path(tempfile.mkdtemp(prefix="bench-proxy-"))
    summaries: list[dict[str, int]] = []
    drop_summaries: list[dict[str, int]] = []
    variants: dict[str, Callable[[int], AbstractContextManager[int]]] = {
        "direct": direct,
        "socat": socat_relay(None),
        "socat -b 262144": socat_relay(262144),
        "stomp-capture, no capture": proxy_relay(None, []),
        CAPTURE_ON: proxy_relay(capture_dir, summaries),
        DROP_MODE: proxy_relay(capture_dir, drop_summaries, "--capture-mode", "drop"),
    }
    bulk: dict[str, list[BulkRun]] = {name: [] for name in variants}
    disk: list[DiskRun] = []
    try:
        for repeat in range(args.repeat):
            for name, through in variants.items():
                if name == CAPTURE_ON:  # the disk right before the capture it is compared with
                    disk.append(disk_write_speed(capture_dir, 2 * total))
                    print(f"disk {repeat + 1}/{args.repeat}: {disk[-1].mb_per_s:.0f} MB/s",
                          flush=True)
                result = run_bulk(total, through)
                bulk[name].append(result)
                print(
                    f"bulk {repeat + 1}/{args.repeat} {name}: {result.mb_per_s_total:.0f} MB/s"
                    f" intact={result.intact}",
                    flush=True,
                )

        with echo_server() as echo_port:
            with stomp_capture(echo_port, capture_dir / "latency") as proxy:
                latency = measure_latency(
                    {"direct": echo_port, "stomp-capture": proxy.port},
                    args.latency_messages,
                    args.rate,
                )
                latency_summary = proxy.stop()
            direct_latency, proxy_latency = latency["direct"], latency["stomp-capture"]
            print(f"latency: {latency}", flush=True)
            held = hold_connections(echo_port, capture_dir / "held", args.connections, args.hold)
            print(f"held: {held}", flush=True)
    finally:
        shutil.rmtree(capture_dir, ignore_errors=True)

    best = {name: best_run(runs) for name, runs in bulk.items()}
    captured = best[CAPTURE_ON]
    ratio = captured.mb_per_s_total / best["socat"].mb_per_s_total
    ratio_tuned = captured.mb_per_s_total / best["socat -b 262144"].mb_per_s_total
    added_p99 = proxy_latency.p99_ms - direct_latency.p99_ms
    all_intact = all(r.intact for runs in bulk.values() for r in runs)
    disk_best = max(disk, key=lambda d: d.mb_per_s)
    share = disk_share(summaries, bulk[CAPTURE_ON], disk)

    def complete(runs: list[dict[str, int]]) -> bool:
        return all(s.get("bytes_captured") == 2 * total and s.get("bytes_dropped") == 0
                   for s in runs)

    env = environment()
    env["load_average_1min"] = f"{load_before:.2f} before, {os.getloadavg()[0]:.2f} after"
    return {
        "environment": env,
        "bytes_each_way": total,
        "repeat": args.repeat,
        "bulk": {name: [asdict(r) for r in runs] for name, runs in bulk.items()},
        "bulk_best_mb_per_s": {n: round(r.mb_per_s_total, 1) for n, r in best.items()},
        "capture_summaries": summaries,
        "capture_summaries_drop_mode": drop_summaries,
        "disk": {"runs": [asdict(d) for d in disk], "best_mb_per_s": round(disk_best.mb_per_s, 1),
                 **share},
        "latency": {
            "direct": asdict(direct_latency),
            "stomp-capture": asdict(proxy_latency),
            "rate_per_s": args.rate,
            "proxy_summary": latency_summary,
        },
        "held_connections": asdict(held),
        "targets": {
            "throughput_vs_socat": round(ratio, 3),
            "throughput_vs_socat_tuned": round(ratio_tuned, 3),
            "throughput_ok": ratio >= TARGET_RATIO,
            "capture_vs_disk": share["share_until_on_disk"],
            "capture_vs_disk_ok": share["share_until_on_disk"] >= TARGET_DISK_SHARE
            and complete(summaries),
            "added_p50_ms": round(proxy_latency.p50_ms - direct_latency.p50_ms, 4),
            "added_p99_ms": round(added_p99, 4),
            "latency_ok": added_p99 <= TARGET_ADDED_P99_MS,
            "no_byte_lost": all_intact and held.alive_after_hold == held.held_at_once
            and held.all_echoed == held.connections,
            "capture_complete": complete(summaries),
            "capture_complete_drop_mode": complete(drop_summaries),
            "drop_mode_loss_recorded": all(
                s.get("loss_recorded_bytes") == s.get("bytes_dropped") for s in drop_summaries
            ),
            "all_connections_captured": held.captured_connections == held.connections
            and held.captured_bytes_ok,
        },
    }


def markdown(result: dict) -> str:
    env = result["environment"]
    t = result["targets"]
    gb = result["bytes_each_way"] / 1e9
    lines = [
        "# stomp-capture proxy benchmark",
        "",
        f"Loopback, {env['cpus']} CPUs, Python {env['python']} with {env['event_loop']},"
        f" socat {env['socat']}, kernel {env['kernel']}; 1-minute load average"
        f" {env['load_average_1min']} (the machine is shared). Written by"
        " `benchmarks/bench_proxy.py`; capture files go to a temporary folder on the same disk.",
        "",
        f"## Bulk: {gb:g} GB each way at once over one connection (best of {result['repeat']})",
        "",
        "| path | best MB/s (both ways) | runs MB/s | every byte checked |",
        "| --- | ---: | --- | --- |",
    ]
    for name, runs in result["bulk"].items():
        speeds = ", ".join(f"{r['mb_per_s_total']:.0f}" for r in runs)
        intact = "yes" if all(r["intact"] for r in runs) else "**NO**"
        lines.append(
            f"| {name} | {result['bulk_best_mb_per_s'][name]:.0f} | {speeds} | {intact} |"
        )
    summaries = result["capture_summaries"]
    def captured(runs: list[dict[str, int]]) -> str:
        return ", ".join(
            f"{s.get('bytes_captured')} / {s.get('bytes_dropped')}"
            f" / {s.get('loss_recorded_bytes')} / {s.get('backlog_waits')}"
            for s in runs
        )

    lines += [
        "",
        "Bytes captured / dropped / recorded as lost in the capture files / times forwarding"
        " waited for the writer, per run. Capture on (default: lossless, 64 MiB buffer):"
        f" {captured(summaries)}. With --capture-mode drop:"
        f" {captured(result['capture_summaries_drop_mode'])}. In lossless mode the proxy stops"
        " reading while the writer is behind; in drop mode forwarding never waits for the disk,"
        " and dropped bytes show as sequence gaps with a capture-loss block each.",
        "",
        *disk_section(result),
        f"## Round trip of a {len(FRAME)}-byte frame at {result['latency']['rate_per_s']:g}/s",
        "",
        "Each round trip through stomp-capture (capture on) is paired with one direct to the"
        " same echo server, so both paths see the same load.",
        "",
        "| path | messages | p50 ms | p90 ms | p99 ms | max ms |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name in ("direct", "stomp-capture"):
        lat = result["latency"][name]
        lines.append(
            f"| {name} | {lat['messages']} | {lat['p50_ms']:.3f} | {lat['p90_ms']:.3f} |"
            f" {lat['p99_ms']:.3f} | {lat['max_ms']:.3f} |"
        )
    lines += ["", *held_section(result["held_connections"]), ""]
    lines += [
        "## Targets",
        "",
        f"- throughput with capture >= {TARGET_RATIO}x socat: {t['throughput_vs_socat']}x"
        f" ({'met' if t['throughput_ok'] else 'NOT met'}; {t['throughput_vs_socat_tuned']}x"
        " socat with 256 KiB buffers)",
        f"- lossless capture >= {TARGET_DISK_SHARE}x the disk's write speed, nothing dropped:"
        f" {t['capture_vs_disk']}x until on disk"
        f" ({'met' if t['capture_vs_disk_ok'] else 'NOT met'})",
        f"- added p99 round trip <= {TARGET_ADDED_P99_MS} ms: {t['added_p99_ms']:.3f} ms"
        f" ({'met' if t['latency_ok'] else 'NOT met'}; added p50 {t['added_p50_ms']:.3f} ms)",
        f"- no byte lost: {t['no_byte_lost']}; capture complete (nothing dropped):"
        f" {t['capture_complete']} by default (lossless),"
        f" {t['capture_complete_drop_mode']} in drop mode; every dropped byte recorded in the"
        f" capture: {t['drop_mode_loss_recorded']}; every held connection and byte in the"
        f" capture: {t['all_connections_captured']}",
        "",
    ]
    return "\n".join(lines)


def disk_section(result: dict) -> list[str]:
    d = result["disk"]
    runs = ", ".join(f"{r['mb_per_s']:.0f}" for r in d["runs"])
    on = result["bulk_best_mb_per_s"][CAPTURE_ON]
    return [
        "## Lossless capture against the disk's write speed",
        "",
        f"The disk under the capture folder, written sequentially with `{d['runs'][0]['tool']}`"
        f" (as much as one capture run writes; the time includes the sync) in the same run:"
        f" **{d['best_mb_per_s']:.0f} MB/s** (runs {runs}). Lossless capture (best run) wrote"
        f" its files at {d['capture_file_mb_per_s_traffic_time']:.0f} MB/s over the traffic's"
        f" time ({on:.0f} MB/s of traffic), **{d['share_traffic_time']}x** the disk's speed,"
        f" and at {d['capture_file_mb_per_s_until_on_disk']:.0f} MB/s until the capture was on"
        f" disk (the proxy's exit after its last fdatasync, the time dd's figure includes):"
        f" **{d['share_until_on_disk']}x** (each run against the disk measured right before"
        f" it: {', '.join(f'{x}x' for x in d['share_per_run'])}). The writer starts writeback"
        " of each batch as it writes it and syncs every --flush-seconds; the traffic runs"
        " ahead of the disk only by what the kernel lets stay dirty meanwhile.",
        "",
    ]


def held_section(held: dict) -> list[str]:
    waited = held["connections"] - held["held_at_once"]
    room = (
        f"the proxy's room under a hard open files limit of {held['proxy_hard_limit']}:"
        f" {held['room']} connections (two descriptors each)"
    )
    lines = [
        f"## {held['connections']} connections through stomp-capture (capture on)",
        "",
        f"- {room}; held at once: {held['held_at_once']}",
        f"- connected and echoed once: {held['connect_and_echo_s']:.2f} s; held"
        f" {held['held_s']:g} s; proxy RSS {held['proxy_rss_mb']:.0f} MB, open descriptors"
        f" {held['proxy_open_fds']}",
        f"- alive after the hold: {held['alive_after_hold']}/{held['held_at_once']}; frames"
        f" echoed: {held['all_echoed']}/{held['connections']}; all closed afterwards:"
        f" {held['closed_afterwards']}",
        f"- accept waits at the limit: {held['accept_limit_waits']}; accept failures:"
        f" {held['accept_failures']}; upstream failures: {held['upstream_failures']}",
        f"- in the capture (the pipeline's reader): {held['captured_connections']} connections;"
        f" every client's bytes both ways: {held['captured_bytes_ok']}",
    ]
    if waited > 0:
        lines.append(
            f"- {waited} clients past the room waited in the proxy's listen backlog (not reset)"
            " and went through once as many of the first had closed. Holding"
            f" {held['connections']} at once needs a hard limit above"
            f" {2 * held['connections']} plus a few; raising it needs CAP_SYS_RESOURCE."
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gb", type=float, default=1.0, help="GB each way per bulk run")
    parser.add_argument("--repeat", type=int, default=2, help="bulk runs per path (best kept)")
    parser.add_argument("--latency-messages", type=int, default=5000)
    parser.add_argument("--rate", type=float, default=1000.0, help="messages a second")
    parser.add_argument("--connections", type=int, default=10_000)
    parser.add_argument("--hold", type=float, default=5.0, help="seconds to hold them")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if shutil.which("socat") is None:
        parser.error("socat (Debian package) is needed as the reference relay")
    result = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "proxy.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "proxy.md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
