"""Copies of the samples' lake (made by a real run, `tests.pipeline.audit.sample_lake`), damaged
as a hostile operator or a failing disk would, and what a refused `stomp-lake run` did to them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.lake.layout import DELTA_LOG, LEDGER, Lake
from tests.pipeline.audit.sample_lake import shared_sample_lake
from tests.support.paths import REPO, SAMPLES


def lake_copy(tmp_path_factory: pytest.TempPathFactory, target: Path) -> Lake:
    """A private copy of the samples' lake (needs the `spark` fixture up)."""
    shutil.copytree(shared_sample_lake(tmp_path_factory).root, target, symlinks=True)
    return Lake(target)


def biggest_table(lake: Lake) -> str:
    """The table with the most data files: the one whose loss shows most."""
    return max(
        lake.table_names(), key=lambda name: len(list(lake.table_path(name).rglob("*.parquet")))
    )


def first_commit(lake: Lake, name: str) -> Path:
    return lake.delta_path(name) / DELTA_LOG / f"{0:020d}.json"


def delete_first_commit(lake: Lake) -> Path:
    commit = first_commit(lake, biggest_table(lake))
    commit.unlink()
    return commit


def remove_one_add(lake: Lake) -> Path:
    commit = first_commit(lake, biggest_table(lake))
    lines = commit.read_text().splitlines(keepends=True)
    adds = [i for i, line in enumerate(lines) if line.startswith('{"add"')]
    assert adds, "the first commit adds no file"
    del lines[adds[0]]
    commit.write_text("".join(lines))
    return commit


def cut_table_log_mid_line(lake: Lake) -> Path:
    commit = first_commit(lake, biggest_table(lake))
    data = commit.read_bytes()
    commit.write_bytes(data[: len(data) * 2 // 3])
    return commit


def garble_ledger_log(lake: Lake) -> Path:
    commit = first_commit(lake, LEDGER)
    data = bytearray(commit.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 8] = b"\x00garble\x00"
    commit.write_bytes(bytes(data))
    return commit


def truncate_ledger_parquet(lake: Lake) -> Path:
    (parquet,) = sorted(lake.ledger_path.glob("*.parquet"))[:1]
    with parquet.open("r+b") as handle:
        handle.truncate(parquet.stat().st_size // 2)
    return parquet


def garble_batch_counter(lake: Lake) -> Path:
    counter = lake.state_dir / "batch-counter.json"
    counter.write_text('{"last": 1')
    return counter


DAMAGES: dict[str, Callable[[Lake], Path]] = {
    "first_commit_deleted": delete_first_commit,
    "add_line_removed": remove_one_add,
    "table_log_cut_mid_line": cut_table_log_mid_line,
    "ledger_log_garbled": garble_ledger_log,
    "ledger_parquet_truncated": truncate_ledger_parquet,
    "batch_counter_garbled": garble_batch_counter,
}


def lake_files(lake: Lake) -> dict[str, tuple[int, int]]:
    """Every file of the lake with its size and mtime, but the lock file (its holder note)."""
    found = {}
    for parent, _, files in os.walk(lake.root):
        for name in files:
            path = Path(parent, name)
            if path != lake.lock_path:
                info = path.stat()
                found[str(path.relative_to(lake.root))] = (info.st_size, info.st_mtime_ns)
    return found


def run_cli(lake: Lake, work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`stomp-lake run` over the samples (it stops before Spark starts when refused)."""
    env = dict(os.environ, PYTHONPATH=str(REPO), STOMP_LAKE_WORK=str(work))
    command = [sys.executable, "-m", "pipeline.cli", "run", "--input", str(SAMPLES)]
    command += ["--lake", str(lake.root), "--no-validate", *args]
    return subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False
    )
