"""Flow pieces: one Spark row per (flow, capture split) instead of one per packet.

The capture pass groups a split's TCP packets by flow and packs each flow's packets into one
binary column of fixed-size records (`PACKET_DTYPE`, no payload: it stays in the capture file
and is read back by offset). Rows through the shuffle then scale with flows x splits, not with
packets. The flow pass gets a flow's pieces sorted by their first packet and merges them back
into the one order packets are fed in: (capture time, file, record offset), whatever file or
split they came from.

A piece's records travel compressed (`pack`, zstd at level 1): they are a third of their size
(a 125 MB split's pieces 2.8 against 8.8 MB), for 30 ms of the split's task to pack and 15 ms of
the flow pass to unpack. Every byte of them is handed to the JVM, cached on disk, shuffled and
sorted in the JVM's heap before the flow pass: `stomp-lake run` on 2.26 GB, runs alternated,
used 6.9-7.2 s of JVM CPU against 8.8-9.4 s, and took 25.6-27.4 s against 26.1-27.9 s.

Endpoints are stored once per piece in canonical order (the smaller (ip, port) first, as
`flow_key`); each packet says whether it travels from the first endpoint to the second
(`reverse` = 0) or back.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from pipeline.ingest.decode import v4_name, v6_name
from pipeline.ingest.records import TcpPacket
from pipeline.net import FlowEnds, flow_key, key_ends

if TYPE_CHECKING:
    from pipeline.ingest.scan import PacketScanner

__all__ = [
    "PACKET_DTYPE", "Piece", "PieceBuilder", "PieceMerger", "flow_key", "key_ends", "pack",
    "unpack", "unpack_column",
]  # fmt: skip

PACKET_DTYPE = np.dtype(
    [
        ("ts_ns", "<i8"),
        ("payload_offset", "<i8"),
        ("record_offset", "<i8"),
        ("seq", "<u4"),
        ("ack", "<u4"),
        ("payload_len", "<i4"),
        ("wire_len", "<i4"),
        ("window", "<i4"),
        ("flags", "<u2"),
        ("reverse", "u1"),
        ("_pad", "u1"),
    ]
)
assert PACKET_DTYPE.itemsize == 48
_CODEC = pa.Codec("zstd", compression_level=1)  # `pack`'s


@dataclass(slots=True)
class Piece:
    """One flow's packets from one split, in file order."""

    key: str
    file_id: int
    packets: np.ndarray  # PACKET_DTYPE

    @property
    def first(self) -> tuple[int, int, int]:
        """The smallest (ts_ns, file_id, record_offset) of its packets: the pieces' sort key."""
        ts = self.packets["ts_ns"]
        at = int(np.argmin(ts))  # the first minimum: the one earliest in the file
        return int(ts[at]), self.file_id, int(self.packets["record_offset"][at])


class PieceBuilder:
    """Collects a split's packets by flow, in file order; `pieces()` packs them.

    Packets come one at a time (`add`, the pure-Python reader) or as the compiled scanner's
    columns (`add_scanned`); a flow's packets are kept as a list of runs, arrays and tuples."""

    def __init__(self, file_id: int) -> None:
        self.file_id = file_id
        self._flows: dict[FlowEnds, list[np.ndarray | list[tuple]]] = {}

    def add(self, p: TcpPacket) -> None:
        src, dst = (p.src_ip, p.src_port), (p.dst_ip, p.dst_port)
        reverse = dst < src
        ends: FlowEnds = (dst + src) if reverse else (src + dst)
        runs = self._flows.get(ends)
        if runs is None:
            runs = self._flows[ends] = []
        if not runs or isinstance(runs[-1], np.ndarray):
            runs.append([])
        rows = runs[-1]
        assert isinstance(rows, list)
        rows.append(
            (
                p.ts_ns,
                p.payload_offset,
                p.record_offset,
                p.seq,
                p.ack,
                p.payload_len,
                p.wire_len,
                p.window,
                p.flags,
                reverse,
                0,
            )
        )

    def add_scanned(self, scanner: PacketScanner) -> None:
        """The packets a scanner holds, grouped by flow with numpy (see `_scanned_flows`)."""
        count = scanner.count
        if not count:
            return
        columns = {name: column[:count] for name, column in scanner.columns.items()}
        flow_of, reverse, ends_of = _scanned_flows(columns)
        packed = np.zeros(count, dtype=PACKET_DTYPE)
        for name in ("ts_ns", "payload_offset", "record_offset", "seq", "ack", "window", "flags"):
            packed[name] = columns[name]
        packed["payload_len"] = columns["payload_len"]
        packed["wire_len"] = columns["payload_len"]
        packed["reverse"] = reverse
        order = np.argsort(flow_of, kind="stable")
        bounds = np.flatnonzero(np.diff(flow_of[order])) + 1
        for run in np.split(order, bounds):
            ends = ends_of[int(flow_of[run[0]])]
            runs = self._flows.get(ends)
            if runs is None:
                runs = self._flows[ends] = []
            runs.append(packed[run])

    def pieces(self) -> Iterator[Piece]:
        """The flows collected so far, each packed, in order of their key; then empty."""
        flows, self._flows = self._flows, {}
        for (ip_a, port_a, ip_b, port_b), runs in sorted(flows.items()):
            key = f"{ip_a}|{port_a}|{ip_b}|{port_b}"
            arrays = [
                run if isinstance(run, np.ndarray) else np.array(run, dtype=PACKET_DTYPE)
                for run in runs
            ]
            packets = arrays[0] if len(arrays) == 1 else _joined(arrays)
            yield Piece(key, self.file_id, packets)


_DIRECTED = np.dtype([("src", "V16"), ("dst", "V16"), ("sport", "<u2"), ("dport", "<u2")])


def _scanned_flows(
    columns: dict[str, np.ndarray],
) -> tuple[np.ndarray, np.ndarray, list[FlowEnds]]:
    """Each packet's flow (an index into the returned ends) and direction in it.

    Packets are grouped by directed pair of endpoints through the scanner's pair hash; should
    two pairs share a hash (FNV is no defence against crafted input), by the pairs themselves,
    which is exact but slower. Each pair's addresses are named, and the canonical order of its
    ends decided, once, exactly as `add` does per packet: by the text of the address, then the
    port.
    """
    _hashes, first, inverse = np.unique(
        columns["pair_hash"], return_index=True, return_inverse=True
    )
    inverse = inverse.ravel()
    same = first[inverse]
    if not all(
        np.array_equal(columns[name][same], columns[name])
        for name in ("src", "dst", "src_port", "dst_port")
    ):
        directed = np.empty(len(inverse), dtype=_DIRECTED)
        directed["src"] = columns["src"].view("V16")[:, 0]
        directed["dst"] = columns["dst"].view("V16")[:, 0]
        directed["sport"] = columns["src_port"]
        directed["dport"] = columns["dst_port"]
        _pairs, first, inverse = np.unique(directed, return_index=True, return_inverse=True)
        inverse = inverse.ravel()
    ends_index: dict[FlowEnds, int] = {}
    flow_of_pair = np.empty(len(first), np.int64)
    reverse_of_pair = np.empty(len(first), np.uint8)
    rows = zip(
        columns["family"][first].tolist(),
        columns["src"][first],
        columns["dst"][first],
        columns["src_port"][first].tolist(),
        columns["dst_port"][first].tolist(),
        strict=True,
    )
    for i, (family, raw_src, raw_dst, sport, dport) in enumerate(rows):
        name, width = (v4_name, 4) if family == 4 else (v6_name, 16)
        src = (name(raw_src[:width].tobytes()), sport)
        dst = (name(raw_dst[:width].tobytes()), dport)
        reverse = dst < src
        ends: FlowEnds = (dst + src) if reverse else (src + dst)
        flow_of_pair[i] = ends_index.setdefault(ends, len(ends_index))
        reverse_of_pair[i] = reverse
    return flow_of_pair[inverse], reverse_of_pair[inverse], list(ends_index)


def _joined(arrays: list[np.ndarray]) -> np.ndarray:
    """Records of one structured dtype, end to end. Joined as whole records: numpy's own
    concatenation of structured arrays promotes their fields in Python first (18 us a call)."""
    dtype = arrays[0].dtype
    records = np.dtype((np.void, dtype.itemsize))
    return np.concatenate([a.view(records) for a in arrays]).view(dtype)


def pack(packets: np.ndarray) -> bytes:
    """A piece's records (`PACKET_DTYPE`), compressed; `unpack` with their count undoes it."""
    raw = np.ascontiguousarray(packets).view(np.uint8)
    return _CODEC.compress(raw, asbytes=True)


def unpack(blob: bytes | pa.Buffer, count: int) -> np.ndarray:
    """The ``count`` records `pack` made ``blob`` of (read-only)."""
    if not count:
        return np.empty(0, dtype=PACKET_DTYPE)
    size = count * PACKET_DTYPE.itemsize
    return np.frombuffer(_CODEC.decompress(blob, decompressed_size=size), dtype=PACKET_DTYPE)


def unpack_column(column: pa.Array, counts: pa.Array) -> list[np.ndarray | None]:
    """Each cell of a binary column of packed pieces (None for a null), with its packets'
    ``counts``, as `unpack` gives it. Straight from the column's buffer, not copied into Python
    bytes first; without nulls, the cells in one call: zstd decompresses frames laid end to
    end as one, instead of making a context per cell."""
    _validity, offsets_buffer, data = column.buffers()
    width = np.int64 if pa.types.is_large_binary(column.type) else np.int32
    start = column.offset
    offsets = np.frombuffer(offsets_buffer, width)[start : start + len(column) + 1].tolist()
    if column.null_count:
        nulls = column.is_null().to_pylist()
        return [
            None if null else unpack(data.slice(begin, end - begin), count)
            for null, begin, end, count in zip(
                nulls, offsets, offsets[1:], counts.to_pylist(), strict=False
            )
        ]
    sizes = np.asarray(counts.to_numpy(zero_copy_only=False), dtype=np.int64)
    total = int(sizes.sum())
    if not total:
        return [unpack(b"", 0) for _ in range(len(column))]
    joined = data.slice(offsets[0], offsets[-1] - offsets[0])
    records = unpack(joined, total)
    return list(np.split(records, np.cumsum(sizes)[:-1]))


class PieceMerger:
    """Merges one flow's pieces, given in order of `Piece.first`, into packet order.

    Packets of the pieces seen so far that sort before the newest piece's first packet can no
    longer be preceded by anything still to come: they are released. Memory holds only the
    pieces that overlap in time (one at a time for a long connection written file after file).
    Held packets known to be in order already (one piece, its times never going back: the usual
    case) are not sorted again.
    """

    def __init__(self) -> None:
        self._pending: list[np.ndarray] = []  # packets with a file_id column
        self._pending_count = 0
        self._in_order = True  # `_pending` is empty, or one array already in packet order

    def add(self, piece: Piece) -> np.ndarray:
        """Take a piece; return the packets now known to come first, in order."""
        ready = self._release_before(piece.first)
        tagged = np.empty(len(piece.packets), dtype=_TAGGED_DTYPE)
        _copy_fields(piece.packets, tagged)
        tagged["file_id"] = piece.file_id
        # One piece's packets are in file order: in packet order too unless a time goes back.
        ts = tagged["ts_ns"]
        self._in_order = not self._pending and not (ts[1:] < ts[:-1]).any()
        self._pending.append(tagged)
        self._pending_count += len(tagged)
        return ready

    def finish(self) -> np.ndarray:
        """Everything still held, in order."""
        return self._release_before(None)

    def _release_before(self, first: tuple[int, int, int] | None) -> np.ndarray:
        if not self._pending:
            return _EMPTY
        if self._in_order:
            merged = self._pending[0]
        else:
            merged = _joined(self._pending) if len(self._pending) > 1 else self._pending[0]
            order = np.lexsort((merged["record_offset"], merged["file_id"], merged["ts_ns"]))
            # Taken as whole records: a structured take copies field by field.
            merged = merged.view(_TAGGED_RECORD)[order].view(_TAGGED_DTYPE)
        cut = len(merged) if first is None else _count_before(merged, first)
        ready, rest = merged[:cut], merged[cut:]
        self._pending = [rest] if len(rest) else []
        self._pending_count = len(rest)
        self._in_order = True
        return ready


_TAGGED_DTYPE = np.dtype(PACKET_DTYPE.descr + [("file_id", "<i4")])
_TAGGED_RECORD = np.dtype((np.void, _TAGGED_DTYPE.itemsize))
_EMPTY = np.empty(0, dtype=_TAGGED_DTYPE)


def _copy_fields(source: np.ndarray, target: np.ndarray) -> None:
    """The packet fields, ahead of ``file_id`` in the tagged records: one copy of the bytes
    (field by field cost a call per field)."""
    if source.flags.c_contiguous:
        rows = len(source)
        into = target.view(np.uint8).reshape(rows, _TAGGED_DTYPE.itemsize)
        packets = source.view(np.uint8).reshape(rows, PACKET_DTYPE.itemsize)
        into[:, : PACKET_DTYPE.itemsize] = packets
        return
    for name in PACKET_DTYPE.names:  # type: ignore[union-attr]
        target[name] = source[name]


def _count_before(ordered: np.ndarray, first: tuple[int, int, int]) -> int:
    """How many packets of ``ordered`` sort before the key ``first``."""
    ts, file_id, offset = first
    keys = ordered["ts_ns"]
    lo = int(np.searchsorted(keys, ts, side="left"))
    hi = int(np.searchsorted(keys, ts, side="right"))
    for index in range(lo, hi):  # equal times: file, then record offset
        row = ordered[index]
        if (int(row["file_id"]), int(row["record_offset"])) >= (file_id, offset):
            return index
    return hi
