"""Cut a pcap in two at the middle of its capture time, as rotation would, keeping records as-is."""

from __future__ import annotations

import struct
from pathlib import Path

HEADER = 24
RECORD = 16


def split_by_time(source: Path, out_dir: Path) -> tuple[Path, Path]:
    data = source.read_bytes()
    order = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    records: list[tuple[int, bytes]] = []
    offset = HEADER
    while offset + RECORD <= len(data):
        seconds, fraction, captured, _ = struct.unpack_from(order + "IIII", data, offset)
        end = offset + RECORD + captured
        records.append((seconds * 10**9 + fraction, data[offset:end]))
        offset = end
    middle = (records[0][0] + records[-1][0]) // 2
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = (out_dir / f"{source.stem}-1.pcap", out_dir / f"{source.stem}-2.pcap")
    paths[0].write_bytes(data[:HEADER] + b"".join(r for t, r in records if t < middle))
    paths[1].write_bytes(data[:HEADER] + b"".join(r for t, r in records if t >= middle))
    return paths
