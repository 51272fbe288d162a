"""maintain.py against real Delta tables and a real ledger (pipeline venv, in process)."""

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
from stomp_lake_dags import maintain
from stomp_lake_dags.assets import CommitReport

from pipeline.lake import Lake, Ledger
from pipeline.lake.batches import batch_sequence
from pipeline.lake.commit import DataFile, app_id_for, commit_files
from pipeline.lake.fingerprint import fingerprint
from pipeline.lake.statefile import write_json_atomic

DAY = 86_400


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

    assert maintain.main(["--lake", str(tmp_path), "compact"]) == 0

    assert len(DeltaTable(str(table)).file_uris()) == 1
    assert sorted_rows(table) == before_rows
    assert maintain.main(["--lake", str(tmp_path), "compact"]) == 0  # idempotent
    assert sorted_rows(table) == before_rows


def test_vacuum_removes_replaced_files_past_retention(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, appends=3)
    assert maintain.main(["--lake", str(tmp_path), "compact"]) == 0
    on_disk = len(list(table.glob("*.parquet")))
    assert on_disk == 4  # the 3 replaced files stay until a vacuum

    assert maintain.main(["--lake", str(tmp_path), "vacuum", "--retention-hours", "0"]) == 0

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

    assert maintain.main(command) == 0

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
    assert maintain.main([*command, "--older-than-days", "1", "--action", "keep"]) == 0
    assert old.exists()


def test_move_without_archive_is_a_usage_error(tmp_path: Path) -> None:
    command = ["--lake", str(tmp_path), "retain-captures", "--capture-dir", str(tmp_path)]
    assert maintain.main([*command, "--older-than-days", "1", "--action", "move"]) == 2


def last_report(out: str) -> CommitReport:
    return CommitReport.from_line(out.strip().splitlines()[-1])


def test_check_fails_for_files_missing_from_the_ledger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    captures, lake = tmp_path / "captures", tmp_path / "lake"
    done = aged_capture(captures, "done.pcap", 0, b"done")
    missing = aged_capture(captures, "missing.pcap", 0, b"missing")
    _ingest_into_ledger(lake, [done])
    small_file_table(lake, appends=1)

    assert maintain.main(["--lake", str(lake), "check", str(done)]) == 0
    assert maintain.main(["--lake", str(lake), "check", str(done), str(missing)]) == 1
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

    assert maintain.main([*command, "--committed-since", between.isoformat(), str(early)]) == 0
    assert last_report(capsys.readouterr().out) == CommitReport((), (), 1)

    files = [str(early), str(late), str(copy)]
    assert maintain.main([*command, "--committed-since", between.isoformat(), *files]) == 0
    assert last_report(capsys.readouterr().out).batches == ("batch-late",)

    assert maintain.main([*command, *files]) == 0
    assert last_report(capsys.readouterr().out).batches == ("batch-early", "batch-late")


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

    assert maintain.main(["--lake", str(lake.root), "check", str(capture)]) == 0

    assert last_report(capsys.readouterr().out) == CommitReport(("b1",), ("frames", "sessions"), 1)


def _place(table: Path, rows: pa.Table) -> DataFile:
    table.mkdir(parents=True, exist_ok=True)
    pq.write_table(rows, table / "part-0.parquet")
    info = (table / "part-0.parquet").stat()
    return DataFile("part-0.parquet", info.st_size, {}, info.st_mtime_ns // 10**6, rows.num_rows)


def test_check_fails_on_a_lake_without_tables(tmp_path: Path) -> None:
    captures, lake = tmp_path / "captures", tmp_path / "lake"
    done = aged_capture(captures, "done.pcap", 0, b"done")
    _ingest_into_ledger(lake, [done])
    assert maintain.main(["--lake", str(lake), "check", str(done)]) == 1


def test_check_needs_an_aware_time(tmp_path: Path) -> None:
    Lake(tmp_path).ensure()
    command = ["--lake", str(tmp_path), "check", "--committed-since", "2026-11-20T10:00:00"]
    assert maintain.main(command) == 2


def carried_state(lake: Lake, batch_id: str, connections: int, days_old: float) -> Path:
    """State as `stomp-lake run` leaves it: one folder per batch, a pointer to the current one."""
    root = lake.state_dir / "connections"
    (root / batch_id).mkdir(parents=True)
    keys = [f"k{i}" for i in range(connections)]
    rows = pa.table({"flow_key": keys, "state": [b"s"] * connections})
    pq.write_table(rows, root / batch_id / "part-00000.parquet")  # written even when empty
    (root / "current.json").write_text(json.dumps({"batch_id": batch_id}))
    when = time.time() - days_old * DAY
    for path in (root / "current.json", root / batch_id):
        os.utime(path, (when, when))
    return root / batch_id


def test_state_age_only_when_connections_are_carried(tmp_path: Path) -> None:
    lake = Lake(tmp_path).ensure()
    assert maintain.carried_state_age_days(lake, time.time()) is None
    carried_state(lake, "b1", connections=0, days_old=10)
    assert maintain.carried_state_age_days(lake, time.time()) is None  # state file, no rows
    carried_state(lake, "b2", connections=2, days_old=10)
    assert maintain.carried_connections(lake) == 2
    assert maintain.carried_state_age_days(lake, time.time()) == pytest.approx(10, abs=0.01)


def test_young_state_is_kept_without_running_the_pipeline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lake = Lake(tmp_path / "lake").ensure()
    carried_state(lake, "b1", connections=1, days_old=2)
    missing_binary = tmp_path / "no-such-stomp-lake"
    command = ["--lake", str(lake.root), "expire-state", "--older-than-days", "7"]
    command += ["--stomp-lake", str(missing_binary), "--batch-id", "expire-1"]

    assert maintain.main(command) == 0

    out = capsys.readouterr().out
    assert "2.0 days old, keeping" in out
    assert not last_report(out).changed


def test_vacuum_prunes_superseded_connection_state(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake").ensure()
    old = carried_state(lake, "b1", connections=1, days_old=3)
    pending = carried_state(lake, "b2", connections=1, days_old=3)
    write_json_atomic(lake.state_dir / "pending-batch.json", _pending("b2"))
    current = carried_state(lake, "b3", connections=1, days_old=3)
    young = carried_state(lake, "b0", connections=1, days_old=0)
    (lake.state_dir / "connections" / "current.json").write_text(json.dumps({"batch_id": "b3"}))

    assert maintain.main(["--lake", str(lake.root), "vacuum", "--retention-hours", "24"]) == 0

    assert not old.exists()
    assert pending.exists() and current.exists() and young.exists()


def _pending(batch_id: str) -> dict:
    return {"batch_id": batch_id, "seq": 2, "files": [], "started_at": "2026-11-20T10:00:00+00:00"}


def test_missing_lake_is_reported_not_created(tmp_path: Path) -> None:
    assert maintain.main(["--lake", str(tmp_path / "nowhere"), "compact"]) == 1
    assert not (tmp_path / "nowhere").exists()
