"""Flow pieces: packing a split's packets by flow, and merging pieces back into packet order."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.ingest.records import TcpPacket
from pipeline.spark.pieces import (
    PACKET_DTYPE,
    Piece,
    PieceBuilder,
    PieceMerger,
    flow_key,
    key_ends,
    pack,
    unpack,
    unpack_column,
)

A, B = ("10.0.0.1", 40000), ("10.0.0.2", 61613)


def _packet(ts: int, offset: int, from_a: bool = True) -> TcpPacket:
    (sip, sport), (dip, dport) = (A, B) if from_a else (B, A)
    return TcpPacket(ts, sip, sport, dip, dport, 1, 2, 0x18, 100, offset + 16, 5, 5, offset)


def test_flow_key_is_the_same_both_ways_and_splits_back() -> None:
    assert flow_key(*A, *B) == flow_key(*B, *A) == "10.0.0.1|40000|10.0.0.2|61613"
    assert key_ends(flow_key(*B, *A)) == (*A, *B)


def test_builder_packs_each_flow_once_with_its_direction() -> None:
    builder = PieceBuilder(file_id=3)
    builder.add(_packet(10, 0, from_a=True))
    builder.add(_packet(11, 100, from_a=False))
    other = TcpPacket(12, "10.9.9.9", 1, "10.0.0.2", 61613, 0, 0, 2, 0, 0, 0, 0, 200)
    builder.add(other)
    pieces = list(builder.pieces())
    assert [p.key for p in pieces] == sorted([flow_key(*A, *B), "10.0.0.2|61613|10.9.9.9|1"])
    stomp = next(p for p in pieces if p.key == flow_key(*A, *B))
    assert stomp.file_id == 3 and stomp.packets["reverse"].tolist() == [0, 1]
    assert unpack(pack(stomp.packets), 2).tolist() == stomp.packets.tolist()
    assert stomp.first == (10, 3, 0)
    assert list(builder.pieces()) == []


@settings(deadline=None)  # its first example meets pyarrow's first imports
@given(
    st.lists(st.one_of(st.none(), st.integers(0, 5)), min_size=1, max_size=8),
    st.integers(0, 3),
    st.booleans(),
)
def test_a_column_of_pieces_unpacks_as_each_cell_would(
    sizes: list[int | None], skip: int, large: bool
) -> None:
    pieces = [None if n is None else _piece(0, list(range(n)), list(range(n))) for n in sizes]
    cells = [None if piece is None else pack(piece.packets) for piece in pieces]
    column = pa.array(cells, pa.large_binary() if large else pa.binary())[skip:]
    counts = pa.array([None if n is None else n for n in sizes], pa.int32())[skip:]
    unpacked = unpack_column(column, counts)
    assert len(unpacked) == len(column)
    for got, piece in zip(unpacked, pieces[skip:], strict=True):
        assert (got is None) == (piece is None)
        if got is not None and piece is not None:
            assert got.tolist() == piece.packets.tolist()


def test_packed_records_are_smaller_and_come_back_whole() -> None:
    records = np.zeros(1000, dtype=PACKET_DTYPE)
    records["ts_ns"] = np.arange(1000) * 1_000 + 1_736_935_200_000_000_000
    records["payload_offset"] = np.arange(1000) * 1_500 + 24
    records["seq"] = np.arange(1000) * 1_448
    blob = pack(records)
    assert len(blob) < records.nbytes / 2
    assert unpack(blob, 1000).tobytes() == records.tobytes()
    assert len(unpack(pack(records[:0]), 0)) == 0


def _piece(file_id: int, times: list[int], offsets: list[int]) -> Piece:
    records = np.zeros(len(times), dtype=PACKET_DTYPE)
    records["ts_ns"], records["record_offset"] = times, offsets
    return Piece("k", file_id, records)


pieces_strategy = st.lists(
    st.tuples(st.integers(0, 3), st.lists(st.integers(0, 40), min_size=1, max_size=12)),
    min_size=1,
    max_size=8,
)


@settings(deadline=None, max_examples=200)
@given(pieces_strategy)
def test_merged_pieces_come_out_in_time_file_offset_order(spec) -> None:
    pieces = []
    offsets: dict[int, int] = {}
    for file_id, times in spec:
        start = offsets.get(file_id, 0)
        offsets[file_id] = start + len(times)
        pieces.append(_piece(file_id, times, list(range(start, start + len(times)))))
    pieces.sort(key=lambda p: p.first)  # as the flow pass sorts them
    merger = PieceMerger()
    out = [merger.add(piece) for piece in pieces] + [merger.finish()]
    merged = np.concatenate(out)
    keys = list(zip(merged["ts_ns"].tolist(), merged["file_id"].tolist(),
                    merged["record_offset"].tolist(), strict=True))  # fmt: skip
    expected = sorted(
        (t, p.file_id, o)
        for p in pieces
        for t, o in zip(
            p.packets["ts_ns"].tolist(), p.packets["record_offset"].tolist(), strict=True
        )
    )
    assert keys == expected


def test_a_long_connection_written_file_after_file_holds_one_piece_at_a_time() -> None:
    merger = PieceMerger()
    released = 0
    for index in range(5):
        times = list(range(index * 100, index * 100 + 100))
        released += len(merger.add(_piece(index, times, list(range(100)))))
        assert merger._pending_count == 100  # only the newest piece is held
    assert released == 400 and len(merger.finish()) == 100
