"""The flow pass's per-packet loop: one flow's packets, in order, into its connection driver.

Data packets that continue their direction exactly, one after another (bare ACKs of the other
direction between them), are passed on as one run (`ConnectionDriver.data_run`), from the first
such packet on; any other packet ends the run first and goes to `ConnectionDriver.packet` (or,
a bare ACK, to `ConnectionDriver.bare_ack`). Payloads are read back from the capture files.

`feed_packets` here is the readable reference. `_packet_loop.pyx` is the same loop compiled,
used unless STOMP_LAKE_PURE_PYTHON=1 (`pipeline.compiled`); the two make the same driver calls
(`tests/pipeline/spark/test_packet_loop.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pipeline.compiled import kernel
from pipeline.ingest.records import TcpPacket
from pipeline.net import FIN, RST, SYN
from pipeline.reassembly.stream import continues

if TYPE_CHECKING:
    import numpy as np

    from pipeline.driver import ConnectionDriver
    from pipeline.spark.payloads import PayloadFiles

FeedPackets = Callable[
    ["np.ndarray", "ConnectionDriver", tuple[str, int, str, int], "PayloadFiles", int], None
]
NOT_BARE = SYN | FIN | RST
_FIELDS = (
    "ts_ns", "payload_offset", "record_offset", "seq", "ack", "payload_len", "wire_len",
    "window", "flags", "reverse", "file_id",
)  # fmt: skip


def feed_packets(
    packets: np.ndarray,
    driver: ConnectionDriver,
    ends: tuple[str, int, str, int],
    files: PayloadFiles,
    run_packets: int,
) -> None:
    """``packets`` (`pipeline.spark.pieces.PACKET_DTYPE` and a ``file_id`` field) of the flow
    whose endpoints are ``ends`` (``reverse`` packets go from the second to the first); runs
    of at most ``run_packets`` packets."""
    ip_a, port_a, ip_b, port_b = ends
    read, paths = files.read, files.paths
    run = _Run(driver)
    for ts, p_off, r_off, seq, ack, p_len, w_len, window, flags, reverse, file_id in zip(
        *[packets[name].tolist() for name in _FIELDS], strict=True
    ):
        if reverse:
            src_ip, src_port, dst_ip, dst_port = ip_b, port_b, ip_a, port_a
        else:
            src_ip, src_port, dst_ip, dst_port = ip_a, port_a, ip_b, port_b
        plain = not flags & NOT_BARE
        if run.active:
            if reverse == run.reverse:
                if plain and p_len and p_len == w_len and continues(run.next, run.high, seq, p_len):
                    run.add(read(file_id, p_off, p_len), ts, (paths[file_id], r_off))
                    if len(run.timestamps) >= run_packets:
                        run.pass_on()
                    continue
            elif plain and not p_len and not w_len and run.other_known:
                run.acked += 1
                run.acked_ns = run.last_ns = ts
                continue
            run.flush()
        if not p_len:
            if plain and not w_len and driver.bare_ack(src_ip, src_port, ts):
                continue
            payload = b""
        else:
            payload = read(file_id, p_off, p_len)
            if plain and p_len == w_len:
                position = driver.in_order_position(src_ip, src_port)
                if position is not None and continues(*position, seq, p_len):
                    run.start(reverse, src_ip, src_port, dst_ip, dst_port, *position)
                    run.add(payload, ts, (paths[file_id], r_off))
                    continue
        packet = TcpPacket(
            ts, src_ip, src_port, dst_ip, dst_port, seq, ack, flags, window,
            p_off, p_len, w_len, r_off,
        )  # fmt: skip
        driver.packet(packet, payload, (paths[file_id], r_off))
    run.flush()


class _Run:
    """In-order data packets of one sender gathered for `ConnectionDriver.data_run`: started
    (``active``) at the sender's `ConnectionDriver.in_order_position` by a packet that
    continues from there, and ended (``flush``) by the first that does not. Bare ACKs of the
    other sender in between are counted and passed on with the run (`ConnectionDriver.bare_ack`
    of them all): whether the driver takes them (``other_known``) cannot change within a run."""

    __slots__ = (
        "driver", "active", "reverse", "src_ip", "src_port", "dst_ip", "dst_port", "next",
        "high", "payloads", "timestamps", "sources", "last_ns", "other_known", "acked", "acked_ns",
    )  # fmt: skip

    def __init__(self, driver: ConnectionDriver) -> None:
        self.driver = driver
        self.active = self.reverse = self.other_known = False
        self.src_ip = self.dst_ip = ""
        self.src_port = self.dst_port = 0
        self.next = self.high = self.last_ns = self.acked = self.acked_ns = 0
        self.payloads: list[bytes] = []
        self.timestamps: list[int] = []
        self.sources: list[tuple[str, int]] = []

    def start(
        self,
        reverse: bool,
        src_ip: str,
        src_port: int,
        dst_ip: str,
        dst_port: int,
        nxt: int,
        high: int,
    ) -> None:
        self.active = True
        self.reverse, self.src_ip, self.src_port = reverse, src_ip, src_port
        self.dst_ip, self.dst_port = dst_ip, dst_port
        self.next, self.high = nxt, high
        self.other_known = self.driver.takes_bare_ack(dst_ip, dst_port)

    def add(self, payload: bytes, ts_ns: int, source: tuple[str, int]) -> None:
        self.payloads.append(payload)
        self.timestamps.append(ts_ns)
        self.sources.append(source)
        self.next += len(payload)
        if self.next > self.high:
            self.high = self.next
        self.last_ns = ts_ns

    def flush(self) -> None:
        """End the run, passing on what it gathered."""
        self.active = False
        self.pass_on()

    def pass_on(self) -> None:
        """Pass the packets and bare ACKs gathered on; the run goes on."""
        if self.acked:
            self.driver.bare_ack(self.dst_ip, self.dst_port, self.acked_ns, self.acked)
            self.acked = 0
        if self.timestamps:
            payloads = self.payloads
            self.driver.data_run(
                self.src_ip, self.src_port, b"".join(payloads), [len(p) for p in payloads],
                self.timestamps, self.sources, self.last_ns,
            )  # fmt: skip
            self.payloads, self.timestamps, self.sources = [], [], []


def packet_loop() -> FeedPackets:
    """The compiled loop, or this module's (not built, or pure Python asked for)."""
    module = kernel("packet_loop")
    return feed_packets if module is None else module.feed_packets
