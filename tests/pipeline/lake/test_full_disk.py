"""A full disk told in one line, whatever raised it: real ENOSPC from Python, pyarrow, DuckDB and
delta-rs on a small tmpfs (the Spark forms: tests/pipeline/commands/test_run_full_disk.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

from pipeline.errors import DiskFull, StompLakeError
from pipeline.lake.batches import begin_batch, pending_batch
from pipeline.lake.fingerprint import fingerprint
from pipeline.lake.full_disk import UNKNOWN_STAGE, disk_full
from pipeline.lake.layout import Lake
from tests.support.tmpfs import fill, mounted_tmpfs

ROWS = pa.table({"n": pa.array(range(200_000), pa.int64())})


@pytest.fixture
def full(tmp_path: Path) -> Iterator[Path]:
    """A folder on a 1 MB filesystem with no space left."""
    with mounted_tmpfs(tmp_path / "disk", 1) as disk:
        (disk / "lake").mkdir()
        fill(disk / "filler")
        yield disk


def raised(write: Callable[[], object]) -> Exception:
    try:
        write()
    except Exception as error:  # noqa: BLE001  the test looks at whatever it was
        return error
    raise AssertionError("the write did not fail")


def python_write(folder: Path) -> object:
    return (folder / "lake" / "file").write_bytes(b"x" * 100_000)


def pyarrow_write(folder: Path) -> object:
    return pq.write_table(ROWS, folder / "lake" / "rows.parquet")


def duckdb_write(folder: Path) -> object:
    target = folder / "lake" / "rows.parquet"
    return duckdb.connect().execute(f"COPY (SELECT range AS n FROM range(200000)) TO '{target}'")


def delta_rs_write(folder: Path) -> object:
    return write_deltalake(str(folder / "lake" / "table"), ROWS)


@pytest.mark.parametrize("write", [python_write, pyarrow_write, duckdb_write, delta_rs_write])
def test_each_form_of_enospc_becomes_one_line_naming_the_disk(
    full: Path, write: Callable[[Path], object]
) -> None:
    error = raised(lambda: write(full))
    found = disk_full(error, full / "lake")
    assert isinstance(found, DiskFull) and isinstance(found, StompLakeError)
    assert found.exit_code == 1
    message = str(found)
    assert "\n" not in message
    assert message.startswith(f"no space left on device while {UNKNOWN_STAGE} at {full}")
    assert "the lake is unchanged" in message
    assert message.endswith("free space and run again (the same run resumes the batch)")


def test_wrapped_in_another_error_it_is_found_down_the_chain(full: Path) -> None:
    def wrapped() -> None:
        try:
            python_write(full)
        except OSError as error:
            raise RuntimeError("the job failed") from error

    assert disk_full(raised(wrapped), full / "lake") is not None


def test_other_errors_are_left_alone(tmp_path: Path) -> None:
    missing = raised(lambda: (tmp_path / "no" / "such").write_bytes(b""))
    assert disk_full(missing, tmp_path) is None
    assert disk_full(ValueError("bad value"), tmp_path) is None


def test_the_stage_and_the_batch_are_named(full: Path, tmp_path: Path) -> None:
    capture = tmp_path / "one.pcap"
    capture.write_bytes(b"\xd4\xc3\xb2\xa1")
    lake = Lake(full / "lake")
    error = raised(lambda: begin_batch(lake, [fingerprint(capture)], batch_id="b-1"))
    message = str(disk_full(error, lake.root))
    assert message.startswith(f"no space left on device while registering the batch at {full}")
    assert pending_batch(lake) is None
    assert "the lake is unchanged (no ledger yet)" in message
