from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.lake.layout import Lake
from pipeline.lake.lock import LakeBusy, holds_lake_lock, lake_lock, read_lock_holder

REPO = Path(__file__).resolve().parents[3]
HOLDER = (
    "import sys, time; from pipeline.lake.layout import Lake; "
    "from pipeline.lake.lock import lake_lock\n"
    "with lake_lock(Lake(sys.argv[1])):\n"
    "    print('locked', flush=True); time.sleep(float(sys.argv[2]))\n"
)


def start_holder(lake: Lake, seconds: float) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lake.root), str(seconds)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    return holder


def test_second_run_is_refused_with_who_holds_the_lake(lake: Lake) -> None:
    holder = start_holder(lake, 30)
    try:
        started = time.monotonic()
        with pytest.raises(LakeBusy) as refused, lake_lock(lake, wait=0.5):
            pytest.fail("got the lock while another process holds it")
        assert time.monotonic() - started >= 0.5
        message = str(refused.value)
        assert f"pid {holder.pid}" in message and "busy" in message and str(lake.root) in message
        assert refused.value.holder is not None and refused.value.holder["pid"] == holder.pid
    finally:
        holder.kill()
        holder.wait()


def test_second_run_waits_for_the_first(lake: Lake) -> None:
    holder = start_holder(lake, 1.0)
    started = time.monotonic()
    with lake_lock(lake, wait=30):
        waited = time.monotonic() - started
        holder_info = read_lock_holder(lake)
        assert holder_info is not None and holder_info["pid"] == os.getpid()
    holder.wait(timeout=10)
    assert 0.3 < waited < 10


def test_lock_is_free_again_when_the_holder_is_killed(lake: Lake) -> None:
    holder = start_holder(lake, 60)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with lake_lock(lake, wait=0):
        assert holds_lake_lock(lake)
    assert not holds_lake_lock(lake)
    assert read_lock_holder(lake) is None


def test_nested_lock_in_one_process_is_refused_not_deadlocked(lake: Lake) -> None:
    with lake_lock(lake), pytest.raises(LakeBusy, match=f"pid {os.getpid()}"), lake_lock(lake):
        pass


def test_deleting_the_lock_file_does_not_free_the_lake(lake: Lake) -> None:
    holder = start_holder(lake, 30)
    try:
        lake.lock_path.unlink()
        with pytest.raises(LakeBusy), lake_lock(lake, wait=0.3):
            pytest.fail("got the lock after its file was deleted")
    finally:
        holder.kill()
        holder.wait()
    with lake_lock(lake):  # free again once the holder is gone
        assert holds_lake_lock(lake)


def test_a_run_is_refused_when_the_lock_file_was_deleted_and_leaves_staging_alone(
    lake: Lake, tmp_path: Path
) -> None:
    """`stomp-lake run` while another holds the lake and its lock file is gone: exit 3, and
    the holder's staging folder (young, unclaimed: a run under way) untouched."""
    staging = lake.table_path("messages") / "_staging" / "B1.abcdef012345" / "parquet"
    staging.mkdir(parents=True)
    (staging / "part-0.parquet").write_bytes(b"PAR1 in progress")
    holder = start_holder(lake, 60)
    try:
        lake.lock_path.unlink()
        env = dict(os.environ, PYTHONPATH=str(REPO), STOMP_LAKE_WORK=str(tmp_path / "work"))
        samples = REPO / "samples"
        done = subprocess.run(
            [sys.executable, "-m", "pipeline.cli", "run", "--input", str(samples),
             "--lake", str(lake.root), "--no-validate"],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    finally:
        holder.kill()
        holder.wait()
    assert done.returncode == 3, done.stderr
    assert "busy" in done.stderr and "Traceback" not in done.stderr
    assert (staging / "part-0.parquet").read_bytes() == b"PAR1 in progress"


@pytest.mark.spark
@pytest.mark.slow
def test_a_real_run_keeps_the_lake_when_its_lock_file_is_deleted(
    lake: Lake, tmp_path: Path
) -> None:
    """A run held after it staged its first table; its lock file deleted; a second run is
    refused (exit 3) and the first run's staging is untouched; the first then finishes."""
    pause_dir = tmp_path / "pause"
    pause_dir.mkdir()
    env = dict(os.environ, PYTHONPATH=str(REPO), STOMP_LAKE_WORK=str(tmp_path / "work"))
    env.update(STOMP_LAKE_PAUSE_AT="lake.staged", STOMP_LAKE_PAUSE_DIR=str(pause_dir))
    command = [sys.executable, "-m", "pipeline.cli", "run", "--input", str(REPO / "samples"),
               "--lake", str(lake.root), "--no-validate", "--master", "local[2]"]  # fmt: skip
    first = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        marker = pause_dir / "lake.staged.paused"
        deadline = time.monotonic() + 300
        while not marker.exists():
            assert first.poll() is None, first.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the first run never reached lake.staged"
            time.sleep(0.1)
        staging = {p: p.stat().st_mtime_ns for p in lake.tables_dir.rglob("_staging/**/*")}
        assert staging, "the first run staged nothing"
        lake.lock_path.unlink()
        second_env = {k: v for k, v in env.items() if not k.startswith("STOMP_LAKE_PAUSE")}
        second = subprocess.run(command, cwd=REPO, env=second_env, capture_output=True,
                                text=True, timeout=120, check=False)  # fmt: skip
        assert second.returncode == 3, second.stderr
        assert {p: p.stat().st_mtime_ns for p in staging} == staging
        marker.unlink()
        assert first.wait(timeout=300) == 0, first.communicate()[1][-3000:]
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
