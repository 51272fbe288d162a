"""Carried connection state: written by Spark under _state/ with a manifest, readable by the next
batch only, private (it holds raw frame bytes and the passcodes seen on open connections), and
refused when damaged: a real lake whose run carried connections, damaged as a hostile test did."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from pipeline.lake import carried
from pipeline.lake.damage import DamagedLake
from pipeline.lake.integrity import check_lake
from pipeline.lake.layout import Lake
from pipeline.lake.statefile import read_json, write_json_atomic
from tests.support.carried_lake import CARRIED_DAMAGES, carried_lake_copy, state_parts


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
        [
            ("10.0.0.1|40000|10.0.0.2|61613", b"pickled state with passcode:pw", 0),
            ("10.0.0.1|40000|10.0.0.2|61613", b"its spilled rows", 1),
        ],
        "flow_key string, state binary, record_offset long",
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
    assert sorted((r.record_offset, r.record_type, r.state) for r in back.collect()) == [
        (0, "state", b"pickled state with passcode:pw"),
        (1, "state", b"its spilled rows"),
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
        [("10.0.0.1|40000|10.0.0.2|61613", b"s", 0)],
        "flow_key string, state binary, record_offset long",
    )
    carried.write_carried(rows, lake, "b-1")  # a first attempt, then the batch again without
    carried.write_carried(None, lake, "b-1")
    carried.advance(lake, "b-1")
    folder = lake.state_dir / "connections" / "b-1"
    assert [p.name for p in folder.iterdir()] == [carried.MANIFEST]
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert carried.read_carried(spark, lake) is None
    assert carried.check_carried(lake) == []


@pytest.fixture
def carrying(spark, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Lake:
    return carried_lake_copy(tmp_path_factory, tmp_path / "carrying")


def _json(path: Path) -> Any:
    data = read_json(path)
    assert isinstance(data, dict), path
    return data


def _flow_keys(spark, lake: Lake) -> list[str]:
    state = carried.read_carried(spark, lake)
    assert state is not None
    return sorted(row.flow_key for row in state.collect())


def test_a_carried_state_is_listed_in_its_manifest_and_named_with_its_digest(
    spark, carrying: Lake
) -> None:
    assert carried.check_carried(carrying) == [] and check_lake(carrying) == []
    parts = state_parts(carrying)
    assert parts
    folder = parts[0].parent
    manifest = _json(folder / carried.MANIFEST)
    assert [p["file"] for p in manifest["parts"]] == [p.name for p in parts]
    assert all(p["size"] > 0 and p["rows"] > 0 for p in manifest["parts"])
    pointer = _json(carried.pointer_path(carrying))
    assert pointer["batch_id"] == folder.name and pointer["manifest"][carried.HASH]
    assert _json(carried.marker_path(carrying))["first_batch"] == folder.name
    keys = _flow_keys(spark, carrying)
    assert keys
    # A file the manifest does not list is not read (and is no damage).
    (folder / "part-99999-stray.parquet").write_bytes(parts[0].read_bytes())
    assert carried.check_carried(carrying) == []
    assert _flow_keys(spark, carrying) == keys


@pytest.mark.parametrize("damage", sorted(CARRIED_DAMAGES))
def test_damaged_carried_state_is_refused_never_read_as_none(
    spark, carrying: Lake, damage: str
) -> None:
    damaged = CARRIED_DAMAGES[damage](carrying)
    findings = carried.check_carried(carrying)
    assert findings and findings[0].path == damaged, findings
    assert check_lake(carrying) == findings
    with pytest.raises(DamagedLake) as refused:
        carried.read_carried(spark, carrying)
    assert str(damaged) in str(refused.value)
    with pytest.raises(DamagedLake):
        carried.current_state_batch(carrying)


def test_a_manifest_replaced_or_a_pointer_stripped_of_its_digest_is_damage(
    carrying: Lake,
) -> None:
    folder = state_parts(carrying)[0].parent
    manifest_path = folder / carried.MANIFEST
    manifest = _json(manifest_path)
    write_json_atomic(manifest_path, {**manifest, "parts": manifest["parts"][1:]})
    (finding,) = carried.check_carried(carrying)
    assert finding.path == manifest_path and "not the manifest" in finding.problem
    write_json_atomic(carried.pointer_path(carrying), {"batch_id": folder.name})
    (finding,) = carried.check_carried(carrying)
    assert finding.path == carried.pointer_path(carrying)


def test_the_whole_connections_folder_deleted_is_damage(carrying: Lake) -> None:
    shutil.rmtree(carried.connections_dir(carrying))
    (finding,) = carried.check_carried(carrying)
    assert finding.path == carried.pointer_path(carrying)
    assert "carried-since.json" in finding.problem


def test_the_documented_give_up_leaves_a_lake_that_carries_nothing(carrying: Lake) -> None:
    carried.pointer_path(carrying).unlink()
    assert carried.check_carried(carrying)
    shutil.rmtree(carried.connections_dir(carrying))
    carried.marker_path(carrying).unlink()
    assert carried.check_carried(carrying) == []
    assert carried.current_state_batch(carrying) is None


def test_an_empty_state_is_valid_and_distinct_from_a_missing_one(lake: Lake) -> None:
    carried.write_carried(None, lake, "b-1")
    carried.advance(lake, "b-1")
    assert carried.check_carried(lake) == []
    assert carried.current_state_batch(lake) == "b-1"
    carried.pointer_path(lake).unlink()
    (finding,) = carried.check_carried(lake)
    assert finding.path == carried.pointer_path(lake) and "missing" in finding.problem


def test_a_first_batch_killed_before_its_pointer_is_no_damage(lake: Lake) -> None:
    from pipeline.lake.batches import begin_batch

    pending = begin_batch(lake, [], batch_id="b-1")
    carried.write_carried(None, lake, pending.batch_id)  # the pointer moves after the ledger
    assert carried.check_carried(lake) == []
    assert carried.current_state_batch(lake) is None


def test_a_state_of_an_earlier_release_is_read_once_then_gets_a_manifest(
    spark, carrying: Lake
) -> None:
    parts = state_parts(carrying)
    folder = parts[0].parent
    keys = _flow_keys(spark, carrying)
    (folder / carried.MANIFEST).unlink()
    write_json_atomic(carried.pointer_path(carrying), {"batch_id": folder.name})
    (finding,) = carried.check_carried(carrying)  # this release wrote it: never legacy again
    assert finding.path == carried.pointer_path(carrying)
    carried.marker_path(carrying).unlink()
    assert carried.check_carried(carrying) == []
    assert _flow_keys(spark, carrying) == keys
    with parts[0].open("r+b") as handle:  # a cut part is still found: its footer is gone
        handle.truncate(parts[0].stat().st_size // 2)
    (finding,) = carried.check_carried(carrying)
    assert finding.path == parts[0] and "not readable Parquet" in finding.problem
