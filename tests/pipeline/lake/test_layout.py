from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from pipeline.errors import UsageError
from pipeline.lake.layout import (
    LEDGER,
    BadLakeRoot,
    Lake,
    make_private_dir,
    make_tree_private,
    private_umask,
)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_paths_inside_the_root(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    assert lake.table_path("frames") == tmp_path / "lake" / "tables" / "frames"
    assert lake.ledger_path == tmp_path / "lake" / "_ledger"
    assert lake.delta_path(LEDGER) == lake.ledger_path
    assert lake.delta_path("frames") == lake.table_path("frames")
    assert lake.staging_dir("frames") == lake.table_path("frames") / "_staging"
    assert lake.lock_path.parent == lake.state_dir


@pytest.mark.parametrize("name", ["../etc", "a/b", "", "_ledger", "1abc", "a b", "x" * 129])
def test_bad_table_names_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="bad table name"):
        Lake(tmp_path).table_path(name)


@pytest.mark.parametrize("name", ["a\\b", "a%20b"])
def test_roots_delta_rs_would_misread_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="may not contain"):
        Lake(tmp_path / name)


def test_a_root_under_a_regular_file_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("not a folder")
    for root in (tmp_path / "plain" / "lake", tmp_path / "plain"):
        with pytest.raises(BadLakeRoot, match="cannot use .* as a lake: Not a directory") as info:
            Lake(root).ensure()
        assert isinstance(info.value, UsageError) and info.value.exit_code == 2


def test_a_root_delta_rs_would_misread_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        Lake(tmp_path / "100%")


def test_nothing_is_created_until_ensure(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    assert not lake.root.exists()
    lake.ensure()
    assert lake.tables_dir.is_dir() and lake.state_dir.is_dir() and lake.runs_dir.is_dir()


def test_folders_are_private_whatever_the_umask(tmp_path: Path) -> None:
    previous = os.umask(0o022)
    try:
        lake = Lake(tmp_path / "lake").ensure()
    finally:
        os.umask(previous)
    assert mode_of(lake.root) == 0o750
    assert mode_of(lake.tables_dir) == 0o750
    assert mode_of(lake.state_dir) == 0o700


def test_make_private_dir_sets_mode_on_every_new_level(tmp_path: Path) -> None:
    make_private_dir(tmp_path / "a" / "b" / "c")
    assert [mode_of(tmp_path / p) for p in ("a", "a/b", "a/b/c")] == [0o750] * 3


def test_private_umask_is_scoped(tmp_path: Path) -> None:
    previous = os.umask(0o022)
    try:
        with private_umask():
            (tmp_path / "inside").write_text("x")
        (tmp_path / "after").write_text("x")
    finally:
        os.umask(previous)
    assert mode_of(tmp_path / "inside") == 0o640
    assert mode_of(tmp_path / "after") == 0o644


def test_table_names_lists_only_delta_tables(tmp_path: Path) -> None:
    lake = Lake(tmp_path).ensure()
    (lake.table_path("b") / "_delta_log").mkdir(parents=True)
    (lake.table_path("a") / "_delta_log").mkdir(parents=True)
    lake.table_path("not_a_table").mkdir()
    assert lake.table_names() == ["a", "b"]


def test_make_tree_private_fixes_what_another_umask_wrote(tmp_path: Path) -> None:
    (tmp_path / "t" / "date=x").mkdir(parents=True, mode=0o755)
    (tmp_path / "t" / "date=x" / "part.parquet").write_bytes(b"")
    (tmp_path / "t" / "_SUCCESS").write_bytes(b"")
    os.chmod(tmp_path / "t" / "_SUCCESS", 0o644)
    make_tree_private(tmp_path / "t")
    assert [mode_of(tmp_path / "t" / p) for p in ("", "date=x")] == [0o750, 0o750]
    assert [mode_of(tmp_path / "t" / p) for p in ("_SUCCESS", "date=x/part.parquet")] == [0o640] * 2
    assert make_tree_private(tmp_path / "missing") == tmp_path / "missing"
