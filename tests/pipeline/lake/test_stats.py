from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

from pipeline.lake.stats import FREE_TEXT_COLUMNS, file_stats


def footer(tmp_path: Path, table: pa.Table, **options) -> pq.FileMetaData:
    target = tmp_path / "f.parquet"
    pq.write_table(table, target, **options)
    return pq.read_metadata(target)


def test_counts_and_bounds_merge_across_row_groups(tmp_path: Path) -> None:
    table = pa.table({"n": [5, None, 1, 9, None, 3], "s": ["m", "a", None, "z", "q", "b"]})
    metadata = footer(tmp_path, table, row_group_size=2)
    assert metadata.num_row_groups == 3
    stats = file_stats(metadata)
    assert stats["numRecords"] == 6
    assert stats["minValues"] == {"n": 1, "s": "a"}
    assert stats["maxValues"] == {"n": 9, "s": "z"}
    assert stats["nullCount"] == {"n": 2, "s": 1}


def test_timestamps_keep_true_bounds_at_millisecond_precision(tmp_path: Path) -> None:
    low = datetime(2026, 11, 22, 10, 15, 0, 123_456, tzinfo=UTC)
    high = datetime(2026, 11, 22, 10, 15, 1, 999_001, tzinfo=UTC)
    table = pa.table(
        {
            "utc": pa.array([low, high], pa.timestamp("us", tz="UTC")),
            "naive": pa.array(
                [low.replace(tzinfo=None), high.replace(tzinfo=None)], pa.timestamp("us")
            ),
            "day": pa.array([date(2026, 11, 22), date(1969, 12, 31)], pa.date32()),
        }
    )
    stats = file_stats(footer(tmp_path, table))
    assert stats["minValues"]["utc"] == "2026-11-22T10:15:00.123Z"  # rounded down
    assert stats["maxValues"]["utc"] == "2026-11-22T10:15:02.000Z"  # rounded up
    assert stats["minValues"]["naive"] == "2026-11-22T10:15:00.123"
    assert stats["minValues"]["day"] == "1969-12-31"
    assert stats["maxValues"]["day"] == "2026-11-22"


def test_long_strings_keep_a_prefix_minimum_and_no_maximum(tmp_path: Path) -> None:
    table = pa.table({"s": ["y" * 50, "z" * 40]})
    stats = file_stats(footer(tmp_path, table))
    assert stats["minValues"]["s"] == "y" * 32
    assert "s" not in stats["maxValues"]


def test_values_json_cannot_hold_or_delta_does_not_index_are_left_out(tmp_path: Path) -> None:
    table = pa.table(
        {
            "f": [1.5, float("inf")],
            "b": pa.array([b"\x00", None], pa.binary()),
            "nested": [{"x": 1}, {"x": 2}],
            "empty": pa.array([None, None], pa.int64()),
            "flag": [True, False],
        }
    )
    stats = file_stats(footer(tmp_path, table))
    assert "f" not in stats["minValues"] and "f" not in stats["maxValues"]
    assert "b" not in stats["minValues"] and stats["nullCount"]["b"] == 1
    assert "nested" not in stats["nullCount"]
    assert stats["nullCount"]["empty"] == 2 and "empty" not in stats["minValues"]
    assert (stats["minValues"]["flag"], stats["maxValues"]["flag"]) == (False, True)
    json.dumps(stats, allow_nan=False)


def test_only_the_first_columns_are_indexed(tmp_path: Path) -> None:
    table = pa.table({f"c{i}": [i] for i in range(40)})
    stats = file_stats(footer(tmp_path, table))
    assert len(stats["nullCount"]) == 32 and "c31" in stats["minValues"]
    assert "c32" not in stats["minValues"]


def test_agrees_with_delta_rs_own_stats(tmp_path: Path) -> None:
    table = pa.table(
        {
            "n": [3, None, -7],
            "s": ["beta", "alpha", None],
            "d": pa.array([date(2026, 1, 2), date(2025, 12, 31), None], pa.date32()),
            "ts": pa.array(
                [datetime(2026, 1, 2, 3, 4, 5, 123_000, tzinfo=UTC), None, None],
                pa.timestamp("us", tz="UTC"),
            ),
        }
    )
    write_deltalake(tmp_path / "t", table)
    delta = DeltaTable(tmp_path / "t")
    [uri] = delta.file_uris()
    log_line = next(
        line
        for line in (tmp_path / "t" / "_delta_log" / "00000000000000000000.json").open()
        if line.startswith('{"add"')
    )
    theirs = json.loads(json.loads(log_line)["add"]["stats"])
    ours = file_stats(pq.read_metadata(uri))
    assert ours["numRecords"] == theirs["numRecords"]
    assert ours["minValues"] == theirs["minValues"]
    assert ours["maxValues"] == theirs["maxValues"]
    assert ours["nullCount"] == theirs["nullCount"]


def test_free_text_columns_keep_their_null_count_and_no_bounds(tmp_path: Path) -> None:
    table = pa.table(
        {
            "session_id": ["s-1", "s-2"],
            "detail": ["bad line passcode:pw-1", None],
            "ws_path": ["/ws?token=tok-2", "/ws"],
            "body_preview": ["password=pw-3", "x"],
        }
    )
    assert {"detail", "ws_path", "body_preview", "close_reason"} <= FREE_TEXT_COLUMNS
    stats = file_stats(footer(tmp_path, table))
    assert stats["minValues"] == {"session_id": "s-1"}
    assert stats["maxValues"] == {"session_id": "s-2"}
    assert stats["nullCount"] == {"session_id": 0, "detail": 1, "ws_path": 0, "body_preview": 0}
