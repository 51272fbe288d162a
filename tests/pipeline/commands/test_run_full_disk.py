"""`stomp-lake run` on a full disk: one line and exit 1, the lake as it was, and the same run,
once there is space again, gives the tables of a run that never failed.

The lake lives on a small tmpfs that already holds a first batch (two of the samples). A second
run over all the samples is held at a failpoint (`STOMP_LAKE_PAUSE_AT`) while the test fills the
disk, so the write that fails is the one of the stage under test. Spark's scratch is elsewhere
($STOMP_LAKE_WORK): the disk that fills is the lake's. Each case is compared with a control lake
made by the same two runs on a roomy disk (scripts/compare_lakes.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from deltalake import DeltaTable

import schemas
from pipeline.lake.failpoints import PAUSE_AT_ENV, PAUSE_DIR_ENV
from pipeline.lake.layout import LEDGER
from tests.support.paths import REPO, SAMPLES
from tests.support.tmpfs import fill, mounted_tmpfs

pytestmark = [pytest.mark.spark, pytest.mark.slow]

STOMP_LAKE = REPO / ".venv" / "bin" / "stomp-lake"
COMPARE = REPO / "scripts" / "compare_lakes.py"
FIRST_BATCH = ("activemq-heartbeat-v10.pcap", "activemq-queues-acks.pcap")
# rabbitmq-heartbeat-errors.pcap ends with a connection open: the second batch carries state.
DISK_MB = 64
RUN_TIMEOUT_S = 600


@dataclass(frozen=True)
class Lakes:
    inputs: Path  # the samples, where every run reads them
    first: Path  # after the first batch: each case's lake starts as a copy
    control: Path  # after both batches, never short of space
    work: Path


def stomp_lake(
    lake: Path, inputs: list[Path], work: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(STOMP_LAKE), "run", "-q", "--input", *map(str, inputs), "--lake", str(lake),
         "--master", "local[2]"],
        cwd=REPO, env={**os.environ, "STOMP_LAKE_WORK": str(work), **(env or {})},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def finished(process: subprocess.Popen[str]) -> tuple[int, str]:
    _, stderr = process.communicate(timeout=RUN_TIMEOUT_S)
    return process.returncode, stderr


def run_ok(lake: Path, inputs: list[Path], work: Path) -> None:
    code, stderr = finished(stomp_lake(lake, inputs, work))
    assert code == 0, stderr[-4000:]


@pytest.fixture(scope="module")
def lakes(tmp_path_factory: pytest.TempPathFactory) -> Lakes:
    root = tmp_path_factory.mktemp("full-disk")
    inputs = root / "inputs"
    inputs.mkdir()
    for sample in SAMPLES.glob("*.pcap*"):
        shutil.copy2(sample, inputs / sample.name)
    work = root / "work"
    first, control = root / "first", root / "control"
    run_ok(first, [inputs / name for name in FIRST_BATCH], work)
    shutil.copytree(first, control, symlinks=True)
    run_ok(control, [inputs], work)
    return Lakes(inputs, first, control, work)


def versions(lake: Path) -> dict[str, int | None]:
    """Each table's Delta version, and the ledger's."""
    roots = {name: lake / "tables" / name for name in schemas.TABLES}
    roots[LEDGER] = lake / LEDGER
    return {
        name: DeltaTable(str(root)).version() if DeltaTable.is_deltatable(str(root)) else None
        for name, root in roots.items()
    }


def ledger_paths(lake: Path) -> list[str]:
    return sorted(DeltaTable(str(lake / LEDGER)).to_pyarrow_table().column("path").to_pylist())


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with mounted_tmpfs(tmp_path / "disk", DISK_MB) as folder:
        yield folder


# (failpoint the run is held at while the disk fills, the stage its one line names)
STAGES = [
    pytest.param("run.batch_begun", "staging", id="staging"),
    pytest.param("run.staged", "validating", id="validating"),
    pytest.param("run.validated", "writing carried connection state", id="carried-state"),
    pytest.param("run.carried_written", "committing", id="committing"),
]


@pytest.mark.parametrize(("pause_at", "stage"), STAGES)
def test_a_full_disk_leaves_the_lake_as_it_was_and_the_rerun_is_exact(
    lakes: Lakes, disk: Path, tmp_path: Path, pause_at: str, stage: str
) -> None:
    lake = disk / "lake"
    shutil.copytree(lakes.first, lake, symlinks=True)
    before, recorded = versions(lake), ledger_paths(lake)
    held = tmp_path / "held"
    held.mkdir()
    env = {PAUSE_AT_ENV: pause_at, PAUSE_DIR_ENV: str(held)}
    process = stomp_lake(lake, [lakes.inputs], lakes.work, env)
    marker = held / f"{pause_at}.paused"
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not marker.exists():
        assert process.poll() is None, f"the run ended before {pause_at}: {finished(process)}"
        assert time.monotonic() < deadline, f"the run never reached {pause_at}"
        time.sleep(0.1)
    fill(disk / "filler")
    marker.unlink()

    code, stderr = finished(process)
    lines = stderr.splitlines()
    assert code == 1, stderr[-4000:]
    assert len(lines) == 1, stderr[-4000:]
    assert lines[0].startswith(f"stomp-lake run: no space left on device while {stage} at {disk}")
    assert "the lake is unchanged" in lines[0], lines[0]
    assert lines[0].endswith("free space and run again (the same run resumes the batch)")
    assert versions(lake) == before
    assert ledger_paths(lake) == recorded

    (disk / "filler").unlink()
    code, stderr = finished(stomp_lake(lake, [lakes.inputs], lakes.work))
    assert code == 0, stderr[-4000:]
    compared = subprocess.run(
        [str(REPO / ".venv" / "bin" / "python"), str(COMPARE), str(lakes.control), str(lake)],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert compared.returncode == 0, compared.stdout + compared.stderr
    assert ledger_paths(lake) == ledger_paths(lakes.control)
