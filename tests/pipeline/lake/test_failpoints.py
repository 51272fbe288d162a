from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.lake import failpoints
from pipeline.lake.failpoints import (
    KILL_AT_ENV,
    PAUSE_AT_ENV,
    PAUSE_DIR_ENV,
    failpoint,
    parse_kill_at,
)

REPO = Path(__file__).resolve().parents[3]
SCRIPT = (
    "from pipeline.lake.failpoints import failpoint\n"
    "for step in ('a', 'b', 'b', 'b', 'c'):\n"
    "    failpoint(step)\n"
    "    print(step, flush=True)\n"
)


def run_script(kill_at: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != KILL_AT_ENV}
    if kill_at is not None:
        env[KILL_AT_ENV] = kill_at
    return subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize(
    ("kill_at", "printed"),
    [
        ("a", []),
        ("b", ["a"]),
        ("b:1", ["a"]),
        ("b:3", ["a", "b", "b"]),
        ("c", ["a", "b", "b", "b"]),
    ],
)
def test_the_process_dies_by_sigkill_at_the_named_point(kill_at: str, printed: list[str]) -> None:
    result = run_script(kill_at)
    assert result.returncode == -signal.SIGKILL
    assert result.stdout.split() == printed
    name, count = parse_kill_at(kill_at)
    assert f"failpoint {name}:{count} reached" in result.stderr


@pytest.mark.parametrize("kill_at", [None, "", "elsewhere", "b:4", "a:0"])
def test_other_settings_let_the_process_run_through(kill_at: str | None) -> None:
    result = run_script(kill_at)
    if kill_at == "a:0":  # not a count: taken as a name that is never reached
        assert parse_kill_at(kill_at) == ("a:0", 1)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["a", "b", "b", "b", "c"]


def test_names_may_hold_colons_and_dots() -> None:
    assert parse_kill_at("lake.placed:5") == ("lake.placed", 5)
    assert parse_kill_at("x:y") == ("x:y", 1)
    assert parse_kill_at(" run.advanced ") == ("run.advanced", 1)


def test_an_unset_failpoint_reads_the_environment_and_nothing_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Failpoints sit on the run's path: unset, one costs two environment lookups, no count
    kept, no file touched."""
    monkeypatch.delenv(KILL_AT_ENV, raising=False)
    monkeypatch.delenv(PAUSE_AT_ENV, raising=False)
    looked_up: list[str] = []
    real_get = os.environ.get

    def get(name: str, default: str | None = None) -> str | None:
        looked_up.append(name)
        return real_get(name, default)

    monkeypatch.setattr(os.environ, "get", get)
    monkeypatch.setattr(Path, "touch", lambda *_: pytest.fail("a file was touched"))
    reached = dict(failpoints._reached)
    for _ in range(1_000):
        failpoint("run.validated")
    assert dict(failpoints._reached) == reached
    assert looked_up == [KILL_AT_ENV, PAUSE_AT_ENV] * 1_000


def test_a_pause_holds_the_process_until_its_marker_is_removed(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != KILL_AT_ENV}
    env.update({PAUSE_AT_ENV: "b:2", PAUSE_DIR_ENV: str(tmp_path)})
    process = subprocess.Popen(
        [sys.executable, "-c", SCRIPT], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True
    )
    marker = tmp_path / "b.paused"
    deadline = time.monotonic() + 30
    while not marker.exists():
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(0.2)
    assert process.poll() is None  # still held
    marker.unlink()
    out, _ = process.communicate(timeout=30)
    assert process.returncode == 0
    assert out.split() == ["a", "b", "b", "b", "c"]
