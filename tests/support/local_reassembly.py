"""Test helper: single-process reassembly of a set of capture files (the flow pass does the
same on Spark).

Packets of all files are merged by capture time, so files may be listed in any order and a
connection may span several of them.  Memory stays bounded: payloads are read from the mapped
files when needed, each direction buffers at most max_pending_bytes, and connections that
closed are flushed once they have been idle for `linger_ns` of capture time.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator

from pipeline.ingest.reader import CaptureReader
from pipeline.ingest.records import CaptureAnomaly, CaptureStats, TcpPacket
from pipeline.reassembly.connections import ConnectionEvent, ConnectionTracker, canonical_key

SWEEP_EVERY = 4096  # packets between sweeps for closed, idle connections


class LocalReassembly:
    """Iterate to get the ConnectionEvents of all files; anomalies and stats collect on the side."""

    def __init__(
        self,
        paths: Iterable[str],
        *,
        broker_ports: Iterable[int] = (),
        max_pending_bytes: int = 8 * 1024 * 1024,
        linger_ns: int = 120 * 10**9,
    ) -> None:
        self.paths = [str(p) for p in paths]
        self.broker_ports = frozenset(broker_ports)
        self.max_pending_bytes = max_pending_bytes
        self.linger_ns = linger_ns
        self.anomalies: list[tuple[str, CaptureAnomaly]] = []
        self.stats: dict[str, CaptureStats] = {}

    def __iter__(self) -> Iterator[ConnectionEvent]:
        readers = [CaptureReader(path) for path in self.paths]
        try:
            for reader in readers:
                self.stats[reader.path] = reader.stats
            merged = heapq.merge(*(self._packets(i, r) for i, r in enumerate(readers)))
            trackers: dict[tuple[str, int, str, int], ConnectionTracker] = {}
            for count, (ts_ns, index, _offset, packet) in enumerate(merged, 1):
                key = canonical_key(packet)
                tracker = trackers.get(key)
                if tracker is None:
                    tracker = trackers[key] = ConnectionTracker(
                        broker_ports=self.broker_ports, max_pending_bytes=self.max_pending_bytes
                    )
                yield from tracker.add(packet, readers[index].payload(packet))
                if count % SWEEP_EVERY == 0:
                    yield from self._sweep(trackers, ts_ns)
            for key in sorted(trackers):
                yield from trackers[key].flush()
        finally:
            for reader in readers:
                reader.close()

    def _packets(
        self, index: int, reader: CaptureReader
    ) -> Iterator[tuple[int, int, int, TcpPacket]]:
        for item in reader:
            if type(item) is TcpPacket:
                yield item.ts_ns, index, item.record_offset, item
            else:
                self.anomalies.append((reader.path, item))

    def _sweep(
        self, trackers: dict[tuple[str, int, str, int], ConnectionTracker], now_ns: int
    ) -> Iterator[ConnectionEvent]:
        for key in list(trackers):
            conn = trackers[key].connection
            if conn is not None and conn.closed and now_ns - conn.last_ts_ns > self.linger_ns:
                yield from trackers.pop(key).flush()
