"""Rows of each table's shape converted to Arrow as the writer converts them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pytest

import schemas
from pipeline.session.clock import to_datetime
from pipeline.session.frame_rows import FrameRows, new_frame_rows
from pipeline.session.message_rows import AckRow, MessageRow
from pipeline.session.rows import NS_SUFFIX, TableRow
from pipeline.spark.arrow_rows import (
    HeldDicts,
    HeldFrames,
    HeldSlots,
    held_rows,
    row_batch,
    row_struct,
)
from pipeline.spark.flows import STATE_KIND, FlowPassConfig, FlowRunner
from tests.pipeline.spark.test_packet_loop import _pieces
from tests.support.flow_rows import SunkRows
from tests.support.paths import REPO, REPO_CAPTURES
from tests.support.table_rows import anomaly_row


def test_each_table_is_held_in_the_shape_its_rows_are_built_in() -> None:
    for table in schemas.TABLES:
        held = held_rows(table)
        assert len(held) == 0 and held.batch().num_rows == 0, table
        expected = {"frames": HeldFrames, "messages": HeldSlots, "acks": HeldSlots}
        assert type(held) is expected.get(table, HeldDicts), table
    frames = held_rows("frames")
    assert isinstance(frames, HeldFrames) and isinstance(frames.rows, FrameRows)
    assert {held_rows(t).kind for t in ("messages", "acks")} == {MessageRow, AckRow}  # type: ignore[attr-defined]


def test_rows_held_in_their_tables_shape_are_taken_over_not_copied() -> None:
    frames = new_frame_rows()
    assert held_rows("frames", frames).rows is frames  # type: ignore[attr-defined]
    for table in ("messages", "anomalies"):
        rows: list[TableRow] = []
        assert held_rows(table, rows).rows is rows, table  # type: ignore[attr-defined]
    given = (anomaly_row(15, 0),)  # not a list: copied
    held = held_rows("anomalies", given)
    assert len(held) == 1 and held.rows is not given  # type: ignore[attr-defined]


def test_every_table_has_a_row_struct_without_the_batch_id() -> None:
    for table in schemas.TABLES:
        names = [field.name for field in row_struct(table)]
        assert names == [n for n in schemas.load(table).column_names if n != "batch_id"]


def test_every_timestamp_column_has_an_exact_twin_in_nanoseconds() -> None:
    for table in schemas.TABLES:
        struct = row_struct(table)
        for field in struct:
            if pa.types.is_timestamp(field.type):
                twin = struct.field(f"{field.name}{NS_SUFFIX}")
                assert twin.type == pa.int64(), (table, field.name)


def _as_given(table: str, rows: Sequence[TableRow]) -> pa.RecordBatch:
    """The rows converted as they read, datetimes included."""
    return pa.RecordBatch.from_struct_array(pa.array([dict(r) for r in rows], row_struct(table)))


@pytest.mark.parametrize("path", REPO_CAPTURES, ids=lambda p: str(p.relative_to(REPO)))
def test_timestamps_made_from_nanoseconds_are_the_rows_own(path: Path) -> None:
    held = SunkRows()
    runner = FlowRunner(FlowPassConfig((str(path),), close_open=True), held)
    pieces = _pieces([str(path)])
    if pieces:
        runner.feed_batch(pa.RecordBatch.from_pylist(pieces))
    runner.close()
    for kind, rows, _keys in held.items():
        if kind != STATE_KIND and rows:
            assert row_batch(kind, rows).equals(_as_given(kind, list(rows))), kind


def test_timestamps_round_down_to_microseconds_as_the_rows_do() -> None:
    stamps = [-1_001, -1_000, -1, 0, 999, 1_000, 1_736_935_200_000_006_769, None]
    rows = [{**anomaly_row(1, 0), "ts": None, "ts_ns": None, "date": None} for _ in stamps]
    for row, ns in zip(rows, stamps, strict=True):
        row.update(ts=None if ns is None else to_datetime(ns), ts_ns=ns)
    assert row_batch("anomalies", rows).equals(_as_given("anomalies", rows))
