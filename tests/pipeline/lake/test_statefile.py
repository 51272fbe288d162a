from __future__ import annotations

import stat
from pathlib import Path

import pytest

from pipeline.lake.statefile import read_json, write_json_atomic


def test_round_trip_private_and_no_temp_left(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    write_json_atomic(target, {"a": 1})
    write_json_atomic(target, {"a": 2, "b": [1, 2]})
    assert read_json(target) == {"a": 2, "b": [1, 2]}
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_missing_file_reads_as_none(tmp_path: Path) -> None:
    assert read_json(tmp_path / "absent.json") is None


def test_an_empty_or_cut_file_is_an_error_not_none(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    for content in ("", '{"batch_id": "b'):
        target.write_text(content)
        with pytest.raises(ValueError):
            read_json(target)
