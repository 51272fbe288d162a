from typing import Any

import numpy as np

from pipeline.ingest.types import Buffer

LINK_KINDS: dict[int, int]

class PacketScanner:
    capacity: int
    count: int
    packets: int
    bytes: int
    payload_bytes: int
    last_ts_ns: int
    last_sec: int
    columns: dict[str, np.ndarray[Any, Any]]
    def __init__(self, capacity: int) -> None: ...
    def clear(self) -> None: ...
    def reset_counters(self) -> None: ...
    def scan_pcap(
        self,
        buf: Buffer,
        off: int,
        end: int,
        little: bool,
        hlen: int,
        limit: int,
        frac_limit: int,
        frac_ns: int,
        linktype: int,
    ) -> int: ...
    def scan_pcapng(
        self,
        buf: Buffer,
        off: int,
        end: int,
        little: bool,
    ) -> int: ...
    def forget_interfaces(self) -> None: ...
    def add_interface(self, linktype: int, mul: int, div: int, shift: int) -> None: ...

def walk_pcap(
    buf: Buffer,
    off: int,
    stop: int,
    little: bool,
    hlen: int,
    limit: int,
    frac_limit: int,
    last_sec: int,
) -> tuple[int, int]: ...

class PcapngWalk:
    def __init__(self) -> None: ...
    def set_clocks(self, clocks: list[tuple[int, int, int]]) -> None: ...
    def walk(
        self, buf: Buffer, off: int, stop: int, little: bool, last_ts: int
    ) -> tuple[int, int]: ...
