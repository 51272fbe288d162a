"""The lake's state checked before a run: a real lake (the samples', made by a real run) damaged
in each way a hostile test found; the run refuses with exit 5 and one line naming the file, and
changes nothing. Checkpoints on a small table committed as a run commits."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from pipeline.lake.commit import DataFile, app_id_for, commit_files
from pipeline.lake.damage import DamagedLake
from pipeline.lake.integrity import check_lake, ensure_intact, read_records, record_path
from pipeline.lake.layout import DELTA_LOG, LEDGER, Lake
from tests.support.damaged_lake import DAMAGES, lake_copy, lake_files, run_cli

SCHEMA = pa.schema([pa.field("n", pa.int64())])


@pytest.fixture
def lake(spark, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Lake:
    return lake_copy(tmp_path_factory, tmp_path / "lake")


def test_a_lake_a_run_made_is_intact_and_cheap_to_check(lake: Lake) -> None:
    assert check_lake(lake) == []
    assert read_records(lake, LEDGER) and all(
        read_records(lake, name) for name in lake.table_names()
    )  # every commit the run wrote was recorded
    started = time.perf_counter()
    for _ in range(5):
        check_lake(lake)
    per_check = (time.perf_counter() - started) / 5
    print(f"check_lake on the samples' lake: {per_check * 1000:.1f} ms")
    assert per_check < 0.25


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_damage_is_found_and_the_run_refuses_changing_nothing(
    lake: Lake, tmp_path: Path, damage: str
) -> None:
    damaged = DAMAGES[damage](lake)
    findings = check_lake(lake)
    assert findings and findings[0].path == damaged, findings
    with pytest.raises(DamagedLake):
        ensure_intact(lake)
    before = lake_files(lake)
    done = run_cli(lake, tmp_path / "work")
    assert done.returncode == 5, done.stderr
    lines = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert str(damaged) in lines[0] and "docs/operations.md" in lines[0], lines[0]
    assert lake_files(lake) == before  # not a data file removed, nothing written


def test_a_lake_of_an_earlier_release_gets_its_commits_recorded(lake: Lake) -> None:
    """No record yet (or a kill between commit and record): the first intact run records."""
    name = lake.table_names()[0]
    recorded = read_records(lake, name)
    record_path(lake, name).unlink()
    assert check_lake(lake) == []
    ensure_intact(lake)
    assert read_records(lake, name) == recorded


def test_a_record_cut_by_a_kill_is_not_damage(lake: Lake) -> None:
    name = lake.table_names()[0]
    with record_path(lake, name).open("a") as record:
        record.write('{"sha256": "ab')
    assert check_lake(lake) == []
    ensure_intact(lake)  # appends on a line of its own
    assert check_lake(lake) == []


def small_table(lake: Lake, commits: int) -> Path:
    """A table of `commits` commits of one file each, committed as a run commits."""
    path = lake.table_path("t")
    path.mkdir(parents=True)
    for seq in range(1, commits + 1):
        name = f"part-{seq}.parquet"
        pq.write_table(pa.table({"n": [seq]}), path / name)
        placed = DataFile(name, (path / name).stat().st_size, {}, 0, 1)
        commit_files(
            path, [placed], schema=SCHEMA, partition_by=[], app_id=app_id_for("t"),
            batch_id=f"B{seq}", seq=seq,
        )  # fmt: skip
    return path


def checkpointed(tmp_path: Path) -> tuple[Lake, Path]:
    lake = Lake(tmp_path / "small").ensure()
    path = small_table(lake, 3)
    DeltaTable(path).create_checkpoint()
    return lake, path / DELTA_LOG / f"{2:020d}.checkpoint.parquet"


def test_a_checkpoint_is_checked_against_its_commits_then_recorded(tmp_path: Path) -> None:
    lake, checkpoint = checkpointed(tmp_path)
    assert checkpoint.exists() and check_lake(lake) == []
    ensure_intact(lake)
    assert checkpoint.name in read_records(lake, "t")
    for version in range(3):  # log retention may remove what a checkpoint replaced
        (checkpoint.parent / f"{version:020d}.json").unlink()
    assert check_lake(lake) == []


def test_a_checkpoint_changed_after_it_was_recorded_is_damage(tmp_path: Path) -> None:
    lake, checkpoint = checkpointed(tmp_path)
    ensure_intact(lake)
    rows = pq.read_table(checkpoint)
    pq.write_table(rows.slice(0, rows.num_rows - 1), checkpoint)
    assert [d.path for d in check_lake(lake)] == [checkpoint]


def test_a_checkpoint_disagreeing_with_its_commits_is_damage(tmp_path: Path) -> None:
    lake, checkpoint = checkpointed(tmp_path)
    rows = pq.read_table(checkpoint)
    keep = [i for i, add in enumerate(rows.column("add").to_pylist()) if not add][:]
    keep += [i for i, add in enumerate(rows.column("add").to_pylist()) if add][1:]
    pq.write_table(rows.take(sorted(keep)), checkpoint)
    (finding,) = check_lake(lake)
    assert finding.path == checkpoint and "disagrees with commits 0-2" in finding.problem


def test_a_garbled_checkpoint_pointer_is_damage(tmp_path: Path) -> None:
    lake, checkpoint = checkpointed(tmp_path)
    pointer = checkpoint.parent / "_last_checkpoint"
    pointer.write_text('{"vers')
    assert [d.path for d in check_lake(lake)] == [pointer]


def test_a_missing_or_cut_data_file_is_damage(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "small").ensure()
    path = small_table(lake, 2)
    (path / "part-1.parquet").unlink()
    with (path / "part-2.parquet").open("ab") as grown:
        grown.write(b"x")
    problems = {d.path.name: d.problem for d in check_lake(lake)}
    assert problems["part-1.parquet"] == "data file of the current version is missing"
    assert problems["part-2.parquet"].endswith("bytes, the log says " + str(
        (path / "part-2.parquet").stat().st_size - 1
    ))  # fmt: skip


def test_a_commit_the_lake_never_wrote_is_found_missing(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "small").ensure()
    path = small_table(lake, 3)
    (path / DELTA_LOG / f"{2:020d}.json").unlink()  # the newest: no gap to show it
    (finding,) = check_lake(lake)
    assert "commit 2 is missing, though this lake committed it" in finding.problem


def test_a_lost_counter_is_rebuilt_unless_a_registry_entry_is_garbled(tmp_path: Path) -> None:
    from pipeline.lake.batches import batch_sequence, counter_path

    lake = Lake(tmp_path / "small").ensure()
    assert [batch_sequence(lake, b) for b in ("B1", "B2")] == [1, 2]
    counter_path(lake).unlink()  # the documented repair of a garbled counter
    assert check_lake(lake) == []
    entry = lake.state_dir / "batches" / "B2.json"
    entry.write_text('{"seq": ')
    assert [d.path for d in check_lake(lake)] == [entry]
    entry.write_text('{"batch_id": "B2", "seq": 2}')
    assert batch_sequence(lake, "B3") == 3
