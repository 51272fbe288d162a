"""Cut a pcap into several, keeping records as-is: in two at the middle of its capture time, as
rotation would, or dealt at random over several files."""

from __future__ import annotations

import random
import struct
from pathlib import Path

HEADER = 24
RECORD = 16


def split_by_time(source: Path, out_dir: Path) -> tuple[Path, Path]:
    data = source.read_bytes()
    records = _records(data)
    middle = (records[0][0] + records[-1][0]) // 2
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = (out_dir / f"{source.stem}-1.pcap", out_dir / f"{source.stem}-2.pcap")
    paths[0].write_bytes(data[:HEADER] + b"".join(r for t, r in records if t < middle))
    paths[1].write_bytes(data[:HEADER] + b"".join(r for t, r in records if t >= middle))
    return paths


def _records(data: bytes) -> list[tuple[int, bytes]]:
    """(capture time, whole record) of every record of a classic pcap."""
    order = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    records: list[tuple[int, bytes]] = []
    offset = HEADER
    while offset + RECORD <= len(data):
        seconds, fraction, captured, _ = struct.unpack_from(order + "IIII", data, offset)
        end = offset + RECORD + captured
        records.append((seconds * 10**9 + fraction, data[offset:end]))
        offset = end
    return records


def scatter(
    source: Path, out_dir: Path, files: int, *, seed: int = 0, copies: float = 0.0
) -> list[Path]:
    """Deal a pcap's records at random over `files` captures (each keeps its records in the
    source order), as several capture points or overlapping rotations would; a `copies` share
    of the records lands in two files. The paths come back in random order."""
    rng = random.Random(seed)
    data = source.read_bytes()
    parts: list[list[bytes]] = [[] for _ in range(files)]
    for _ts, record in _records(data):
        first = rng.randrange(files)
        parts[first].append(record)
        if files > 1 and rng.random() < copies:
            parts[(first + rng.randrange(1, files)) % files].append(record)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{source.stem}-{n:02d}.pcap" for n in range(files)]
    for path, records in zip(paths, parts, strict=True):
        path.write_bytes(data[:HEADER] + b"".join(records))
    rng.shuffle(paths)
    return paths
