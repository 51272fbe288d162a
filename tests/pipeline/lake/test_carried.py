"""Carried connection state: written by Spark under _state/, readable by the next batch only,
and private (it holds raw frame bytes and the passcodes seen on open connections)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from pipeline.lake import carried
from pipeline.lake.layout import Lake


def _modes(root: Path) -> dict[str, int]:
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            out[str(path.relative_to(root))] = stat.S_IMODE(path.stat().st_mode)
    return out


@pytest.mark.spark
def test_state_is_written_private_and_read_back(spark, lake: Lake) -> None:
    rows = spark.createDataFrame(
        [("10.0.0.1|40000|10.0.0.2|61613", b"pickled state with passcode:pw")],
        "flow_key string, state binary",
    )
    carried.write_carried(rows, lake, "b-1")
    carried.advance(lake, "b-1")
    state = lake.state_dir / "connections"
    modes = _modes(state)
    assert any(name.endswith(".parquet") for name in modes)
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    for name, mode in modes.items():
        expected = 0o700 if (state / name).is_dir() else 0o600
        assert mode == expected, f"{oct(mode)} {name}"
    back = carried.read_carried(spark, lake)
    assert back is not None
    assert [(r.record_type, r.state) for r in back.collect()] == [
        ("state", b"pickled state with passcode:pw")
    ]


def test_a_lake_made_before_keeps_its_state_folder_private(lake: Lake) -> None:
    connections = lake.state_dir / "connections"
    lake.ensure()
    connections.mkdir(mode=0o755)
    os.chmod(connections, 0o755)
    assert carried.current_state_batch(lake) is None
    assert stat.S_IMODE(connections.stat().st_mode) == 0o700


@pytest.mark.spark
def test_a_batch_that_leaves_no_connection_open_carries_no_state(spark, lake: Lake) -> None:
    rows = spark.createDataFrame(
        [("10.0.0.1|40000|10.0.0.2|61613", b"s")], "flow_key string, state binary"
    )
    carried.write_carried(rows, lake, "b-1")  # a first attempt, then the batch again without
    carried.write_carried(None, lake, "b-1")
    carried.advance(lake, "b-1")
    folder = lake.state_dir / "connections" / "b-1"
    assert list(folder.iterdir()) == []
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert carried.read_carried(spark, lake) is None
