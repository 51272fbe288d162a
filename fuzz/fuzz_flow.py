"""Fuzz the flow pass without Spark, compiled against pure Python: segments in, table rows out.

Input layout: byte 0 picks the split size, whether connections still open at the end are
closed, and whether the compiled pass spills the rows of unsettled MESSAGEs past the newest one
to disk (`pipeline.session.spilled`), and hands its rows over two at a time, while the
pure-Python pass holds them all in memory; the
rest is 6-byte segment records on one 4-tuple, as `fuzz_reassembly` reads them (direction and
flags, stream position, length, bytes cut by the snapshot length, time step; payloads cut from
real STOMP streams). They are written as a pcap file (Ethernet, IPv4, TCP), which goes through
the whole per-file and per-flow pass (`fuzz.offline`: the capture scanner, flow pieces, the
packet loop, reassembly, the connection driver, the decoder, the session model and its Arrow
columns) twice: with the package's compiled modules, and with their pure-Python twin
(`fuzz.twins`).

Checked for every input: nothing raises; the rows convert to the tables' Arrow schemas with no
null in a non-null column and every passcode masked; the compiled and the pure-Python pass give
the same capture anomalies, the same rows of every table and the same number of connections
carried (spilled or not).
"""

from __future__ import annotations

import atexit
import os
import struct
import sys
import tempfile
from collections import Counter
from functools import cache

from hypothesis import strategies as st

from fuzz import fuzz_reassembly, harness, twins
from fuzz.offline import OfflineResult, assert_passcodes_masked, run_offline
from pipeline.ingest.records import TcpPacket
from pipeline.session import ModelOptions

MAX_LEN = 1 + fuzz_reassembly.RECORD.size * 200
SPLITS = (64 * 1024 * 1024, 4096, 700, 200)
(PURE_OFFLINE,) = twins.pure("fuzz.offline")
_PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1)  # ns, Ethernet
_RECORD = struct.Struct("<IIII")
_MAC = bytes.fromhex("020000000001020000000002") + b"\x08\x00"


def _ip(address: str) -> bytes:
    return bytes(int(part) for part in address.split("."))


def pcap(items: list[TcpPacket], blob: bytes) -> bytes:
    out = [_PCAP_HEADER]
    for packet in items:
        payload = blob[packet.payload_offset : packet.payload_offset + packet.payload_len]
        tcp = struct.pack(
            "!HHIIBBHHH", packet.src_port, packet.dst_port, packet.seq, packet.ack, 5 << 4,
            packet.flags, packet.window, 0, 0,
        )  # fmt: skip
        total = 20 + len(tcp) + packet.wire_len
        ip = struct.pack(
            "!BBHHHBBH4s4s", 0x45, 0, total & 0xFFFF, 0, 0x4000, 64, 6, 0,
            _ip(packet.src_ip), _ip(packet.dst_ip),
        )  # fmt: skip
        frame = _MAC + ip + tcp + payload
        cut = packet.wire_len - packet.payload_len
        sec, ns = divmod(packet.ts_ns, 1_000_000_000)
        out.append(_RECORD.pack(sec, ns, len(frame), len(frame) + cut))
        out.append(frame)
    return b"".join(out)


@cache
def _scratch() -> str:
    handle, path = tempfile.mkstemp(prefix="fuzz-flow-", suffix=".pcap")
    os.close(handle)
    atexit.register(os.unlink, path)
    return path


def same_result(one: OfflineResult, other: OfflineResult) -> bool:
    """Whether two passes gave the same packets, connections carried, capture anomalies and
    rows of every table, in any order (compared as they are first: the order is mostly the
    same; the two passes' results are of their own twin's class)."""
    fields = ("packets", "carried", "capture_anomalies", "tables")
    if [getattr(one, name) for name in fields] == [getattr(other, name) for name in fields]:
        return True
    return _canonical(one) == _canonical(other)


def _canonical(result: OfflineResult) -> tuple[object, ...]:
    rows = Counter(
        (table, repr(sorted(row.items()))) for table, rows in result.tables.items() for row in rows
    )
    anomalies = sorted(repr(sorted(row.items())) for row in result.capture_anomalies)
    return result.packets, result.carried, anomalies, rows


def check(data: bytes) -> None:
    options = data[0] if data else 0
    items, blob = fuzz_reassembly.packets(data[1:])
    path = _scratch()
    with open(path, "wb") as handle:
        handle.write(pcap(items, blob))
    split_bytes = SPLITS[options % len(SPLITS)]
    close_open = not options & 4
    spilling = bool(options & 8)  # and a bound low enough to give some up
    compiled_options = (
        ModelOptions(max_pending_messages=6, max_pending_in_memory=1)
        if spilling
        else ModelOptions()
    )
    compiled = run_offline(
        [path],
        split_bytes=split_bytes,
        close_open=close_open,
        options=compiled_options,
        batch_rows=2 if spilling else None,
    )
    assert compiled.packets == len(items), (compiled.packets, len(items))
    assert_passcodes_masked(compiled.tables)
    with twins.running_pure():
        python = PURE_OFFLINE.run_offline(
            [path],
            split_bytes=split_bytes,
            close_open=close_open,
            options=(
                PURE_OFFLINE.ModelOptions(max_pending_messages=6)
                if spilling
                else PURE_OFFLINE.ModelOptions()
            ),
            convert=False,  # its rows are held to the compiled pass's, which were converted
        )
    assert same_result(compiled, python), "compiled and pure-Python passes disagree"


def seeds() -> list[bytes]:
    return [
        bytes([spilling | n % 8]) + seed
        for n, seed in enumerate(fuzz_reassembly.seeds())
        for spilling in (0, 8)
    ]


def strategy() -> st.SearchStrategy[bytes]:
    return st.tuples(st.binary(min_size=1, max_size=1), fuzz_reassembly.strategy()).map(b"".join)


if __name__ == "__main__":
    sys.exit(harness.main(sys.modules[__name__]))
