"""`stomp-lake maintain` against real Delta tables and a real ledger, in process."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from pipeline.cli import main
from pipeline.lake import Lake, Ledger, begin_batch
from pipeline.lake.batches import batch_sequence
from pipeline.lake.commit import DataFile, app_id_for, commit_files
from pipeline.lake.fingerprint import fingerprint
from tests.support.carried_state import carry
from tests.support.damaged_lake import garble_batch_counter

DAY = 86_400


def maintain(argv: list[str]) -> int:
    return main(["maintain", *argv])


def small_file_table(lake_root: Path, name: str = "frames", appends: int = 12) -> Path:
    path = Lake(lake_root).ensure().table_path(name)
    for i in range(appends):
        rows = pa.table(
            {"id": pa.array(range(i * 10, i * 10 + 10), pa.int64()), "n": [str(i)] * 10}
        )
        write_deltalake(str(path), rows, mode="append")
    return path


def sorted_rows(path: Path) -> list[dict]:
    return sorted(DeltaTable(str(path)).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])


def aged_capture(folder: Path, name: str, days_old: float, payload: bytes) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(payload)
    when = time.time() - days_old * DAY
    os.utime(path, (when, when))
    return path


def test_compact_merges_small_files_and_keeps_rows(tmp_path: Path) -> None:
    table = small_file_table(tmp_path)
    before_rows = sorted_rows(table)
    assert len(DeltaTable(str(table)).file_uris()) == 12

    assert maintain(["--lake", str(tmp_path), "compact"]) == 0

    assert len(DeltaTable(str(table)).file_uris()) == 1
    assert sorted_rows(table) == before_rows
    assert maintain(["--lake", str(tmp_path), "compact"]) == 0  # idempotent
    assert sorted_rows(table) == before_rows


def test_vacuum_removes_replaced_files_past_retention(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, appends=3)
    assert maintain(["--lake", str(tmp_path), "compact"]) == 0
    on_disk = len(list(table.glob("*.parquet")))
    assert on_disk == 4  # the 3 replaced files stay until a vacuum

    assert maintain(["--lake", str(tmp_path), "vacuum", "--retention-hours", "0"]) == 0

    assert len(list(table.glob("*.parquet"))) == 1
    assert len(sorted_rows(table)) == 30


def _ingest_into_ledger(lake_root: Path, files: list[Path], batch_id: str = "test-1") -> None:
    lake = Lake(lake_root).ensure()
    Ledger(lake).record([fingerprint(f) for f in files], batch_id)


@pytest.mark.parametrize("action", ["delete", "move"])
def test_retention_touches_only_old_ingested_captures(tmp_path: Path, action: str) -> None:
    captures, archive, lake = tmp_path / "captures", tmp_path / "archive", tmp_path / "lake"
    old_ingested = aged_capture(captures, "host/old.pcap", 40, b"old ingested")
    young_ingested = aged_capture(captures, "young.pcap", 1, b"young ingested")
    old_waiting = aged_capture(captures, "waiting.pcapng", 40, b"never ingested")
    _ingest_into_ledger(lake, [old_ingested, young_ingested])
    command = ["--lake", str(lake), "retain-captures", "--capture-dir", str(captures)]
    command += ["--older-than-days", "30", "--action", action, "--archive-dir", str(archive)]

    assert maintain(command) == 0

    assert not old_ingested.exists()
    assert young_ingested.exists() and old_waiting.exists()
    moved = archive / "host" / "old.pcap"
    assert moved.exists() == (action == "move")
    if action == "move":
        assert moved.read_bytes() == b"old ingested"


def test_retention_keep_changes_nothing(tmp_path: Path) -> None:
    captures, lake = tmp_path / "captures", tmp_path / "lake"
    old = aged_capture(captures, "old.pcap", 40, b"x")
    _ingest_into_ledger(lake, [old])
    command = ["--lake", str(lake), "retain-captures", "--capture-dir", str(captures)]
    assert maintain([*command, "--older-than-days", "1", "--action", "keep"]) == 0
    assert old.exists()


def test_move_without_archive_is_a_usage_error(tmp_path: Path) -> None:
    command = ["--lake", str(tmp_path), "retain-captures", "--capture-dir", str(tmp_path)]
    assert maintain([*command, "--older-than-days", "1", "--action", "move"]) == 2


def last_report(out: str) -> dict:
    """The commit report the DAGs read (`stomp_lake_dags.assets.CommitReport`)."""
    return json.loads(out.strip().splitlines()[-1])


def test_check_fails_for_files_missing_from_the_ledger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    captures, lake = tmp_path / "captures", tmp_path / "lake"
    done = aged_capture(captures, "done.pcap", 0, b"done")
    missing = aged_capture(captures, "missing.pcap", 0, b"missing")
    _ingest_into_ledger(lake, [done])
    small_file_table(lake, appends=1)

    assert maintain(["--lake", str(lake), "check", str(done)]) == 0
    assert maintain(["--lake", str(lake), "check", str(done), str(missing)]) == 1
    assert f"not ingested: {missing}" in capsys.readouterr().out


def test_check_reports_the_batches_committed_since_a_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    captures, lake = tmp_path / "captures", tmp_path / "lake"
    early = aged_capture(captures, "early.pcap", 0, b"early")
    late = aged_capture(captures, "late.pcap", 0, b"late")
    copy = aged_capture(captures, "copy-of-late.pcap", 0, b"late")  # same content: a duplicate
    _ingest_into_ledger(lake, [early], "batch-early")
    between = datetime.now(UTC)
    _ingest_into_ledger(lake, [late], "batch-late")
    small_file_table(lake, appends=1)
    command = ["--lake", str(lake), "check"]

    assert maintain([*command, "--committed-since", between.isoformat(), str(early)]) == 0
    assert last_report(capsys.readouterr().out) == {"batches": [], "tables": [], "files": 1}

    files = [str(early), str(late), str(copy)]
    assert maintain([*command, "--committed-since", between.isoformat(), *files]) == 0
    assert last_report(capsys.readouterr().out)["batches"] == ["batch-late"]

    assert maintain([*command, *files]) == 0
    assert last_report(capsys.readouterr().out)["batches"] == ["batch-early", "batch-late"]


def test_check_names_the_tables_the_batches_committed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lake = Lake(tmp_path / "lake").ensure()
    capture = aged_capture(tmp_path / "captures", "a.pcap", 0, b"a")
    _ingest_into_ledger(lake.root, [capture], "b1")
    rows = pa.table({"n": pa.array([1], pa.int64())})
    for table in ("sessions", "frames"):  # committed as the pipeline does: app transaction
        files = [_place(lake.table_path(table), rows)]
        commit_files(
            lake.table_path(table), files, schema=rows.schema, partition_by=[],
            app_id=app_id_for(table), batch_id="b1", seq=batch_sequence(lake, "b1"),
        )  # fmt: skip
    write_deltalake(str(lake.table_path("acks")), rows)  # a table the batch did not reach

    assert maintain(["--lake", str(lake.root), "check", str(capture)]) == 0

    report = last_report(capsys.readouterr().out)
    assert report == {"batches": ["b1"], "tables": ["frames", "sessions"], "files": 1}


def _place(table: Path, rows: pa.Table) -> DataFile:
    table.mkdir(parents=True, exist_ok=True)
    pq.write_table(rows, table / "part-0.parquet")
    info = (table / "part-0.parquet").stat()
    return DataFile("part-0.parquet", info.st_size, {}, info.st_mtime_ns // 10**6, rows.num_rows)


def test_check_fails_on_a_lake_without_tables(tmp_path: Path) -> None:
    captures, lake = tmp_path / "captures", tmp_path / "lake"
    done = aged_capture(captures, "done.pcap", 0, b"done")
    _ingest_into_ledger(lake, [done])
    assert maintain(["--lake", str(lake), "check", str(done)]) == 1


def test_check_needs_an_aware_time(tmp_path: Path) -> None:
    Lake(tmp_path).ensure()
    command = ["--lake", str(tmp_path), "check", "--committed-since", "2026-11-20T10:00:00"]
    assert maintain(command) == 2


def test_young_state_is_kept_without_running_the_pipeline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lake = Lake(tmp_path / "lake").ensure()
    carry(lake, "b1", connections=1, days_old=2)
    command = ["--lake", str(lake.root), "expire-state", "--older-than-days", "7"]
    command += ["--batch-id", "expire-1", "--master", "no-such-master"]

    assert maintain(command) == 0

    out = capsys.readouterr().out
    assert "2.0 days old, keeping" in out
    assert last_report(out) == {"batches": [], "tables": [], "files": 0}


def test_vacuum_prunes_superseded_connection_state(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake").ensure()
    old = carry(lake, "b1", connections=1, days_old=3)
    pending = carry(lake, "b2", connections=1, days_old=3)
    young = carry(lake, "b0", connections=1, days_old=0)
    current = carry(lake, "b3", connections=1, days_old=3)
    begin_batch(lake, [], batch_id="b2")

    assert maintain(["--lake", str(lake.root), "vacuum", "--retention-hours", "24"]) == 0

    assert not old.exists()
    assert pending.exists() and current.exists() and young.exists()


def test_a_damaged_lake_is_refused_and_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = small_file_table(tmp_path, appends=3)
    garble_batch_counter(Lake(tmp_path))

    assert maintain(["--lake", str(tmp_path), "compact"]) == 5

    assert len(DeltaTable(str(table)).file_uris()) == 3
    assert "batch-counter.json" in capsys.readouterr().err


def test_a_busy_lake_is_exit_3(tmp_path: Path) -> None:
    from pipeline.lake import lake_lock

    small_file_table(tmp_path, appends=1)
    with lake_lock(Lake(tmp_path)):
        assert maintain(["--lake", str(tmp_path), "--wait-lock", "0", "compact"]) == 3


def test_missing_lake_is_reported_not_created(tmp_path: Path) -> None:
    assert maintain(["--lake", str(tmp_path / "nowhere"), "compact"]) == 1
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.spark
def test_state_carried_too_long_is_closed_by_a_run(
    spark, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from pipeline.lake.carried import pointer_path
    from pipeline.lake.maintenance import carried_connections
    from tests.support.carried_lake import carried_lake_copy

    lake = carried_lake_copy(tmp_path_factory, tmp_path / "lake")
    carried = carried_connections(lake)
    when = time.time() - 8 * DAY
    os.utime(pointer_path(lake), (when, when))
    command = ["--lake", str(lake.root), "expire-state", "--older-than-days", "7"]
    command += ["--batch-id", "expire-1", "--master", "local[1]", "--", "--no-validate"]

    assert maintain(command) == 0

    out = capsys.readouterr().out
    assert f"{carried} connections carried for 8.0 days: closing them" in out
    assert "+ stomp-lake run --input " in out
    report = last_report(out)
    assert report["batches"] == ["expire-1"] and "sessions" in report["tables"]
    assert carried_connections(lake) == 0
