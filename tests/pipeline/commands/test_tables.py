"""`stomp-lake tables`: the listing of a real lake whose Delta tables delta-rs wrote (no Spark)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from pipeline.commands.tables import print_tables
from schemas import TABLES

HEADER = "table              version       rows  files       bytes  last commit"


def _write(lake: Path, name: str, *row_counts: int) -> None:
    """One commit (a table version) per count, appending that many rows."""
    for count in row_counts:
        write_deltalake(
            str(lake / "tables" / name), pa.table({"seq": list(range(count))}), mode="append"
        )


def _files_bytes(lake: Path, name: str) -> tuple[int, int]:
    actions = pa.table(DeltaTable(str(lake / "tables" / name)).get_add_actions())
    return actions.num_rows, sum(actions.column("size_bytes").to_pylist())


def test_each_table_is_a_row_under_the_header_and_the_lake_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lake = tmp_path / "lake"
    _write(lake, "sessions", 3)
    _write(lake, "frames", 5, 2, 4)
    started = datetime.now().astimezone()
    assert print_tables(lake) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == HEADER
    assert lines[-1] == f"lake: {lake.resolve()}"
    rows = [line.split() for line in lines[1:-1]]
    assert [row[0] for row in rows] == ["frames", "sessions"]  # by name
    for row, version, count in zip(rows, ["2", "0"], ["11", "3"], strict=True):
        files, size = _files_bytes(lake, row[0])
        assert row[1:5] == [version, count, str(files), str(size)]
        when = datetime.fromisoformat(row[5])
        assert when.utcoffset() is not None and when.microsecond == 0  # seconds, with zone
        assert abs((when - started).total_seconds()) < 60


def test_columns_line_up_under_the_header(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lake = tmp_path / "lake"
    _write(lake, "acks", 12345)
    print_tables(lake)
    header, row = capsys.readouterr().out.splitlines()[:2]
    # right-aligned numbers end where their heading ends
    for heading in ("version", "rows", "files", "bytes"):
        end = header.index(heading) + len(heading)
        assert row[end - 1] != " " and row[end] == " ", heading
    assert row.index(row.split()[5]) == header.index("last commit")


def test_columns_line_up_for_every_table_the_lake_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lake = tmp_path / "lake"
    for name in TABLES:
        _write(lake, name, 1)
    print_tables(lake)
    header, *rows = capsys.readouterr().out.splitlines()[:-1]
    assert {len(row.split()[0]) for row in rows} >= {len("websocket_controls")}
    assert {row.index(row.split()[5]) for row in rows} == {header.index("last commit")}


def test_folders_without_a_delta_log_are_not_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lake = tmp_path / "lake"
    _write(lake, "receipts", 1)
    (lake / "tables" / "half_made").mkdir()
    (lake / "tables" / "notes.txt").write_text("not a table")
    assert print_tables(lake) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:-1]]
    assert names == ["receipts"]


@pytest.mark.parametrize("made", [False, True])
def test_a_lake_without_tables_says_so_and_returns_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], made: bool
) -> None:
    lake = tmp_path / "lake"
    if made:
        (lake / "tables").mkdir(parents=True)
    assert print_tables(lake) == 1
    assert capsys.readouterr().out == f"no tables in {lake.resolve()}\n"
    assert (lake / "tables").exists() is made  # listing creates nothing


def test_a_relative_root_is_shown_resolved(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(tmp_path / "lake", "errors", 1)
    monkeypatch.chdir(tmp_path)
    assert print_tables(Path("lake")) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"lake: {(tmp_path / 'lake').resolve()}"


def test_the_ledger_is_not_listed_as_a_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lake = tmp_path / "lake"
    write_deltalake(str(lake / "_ledger"), pa.table({"path": ["a.pcap"]}))
    assert print_tables(lake) == 1
    assert capsys.readouterr().out.startswith("no tables in ")
