"""The installed `stomp-lake` program: main's exit code and all of its output, then a quick exit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

STOMP_LAKE = Path(sys.executable).parent / "stomp-lake"


def _program(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(STOMP_LAKE), *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_the_program_keeps_mains_exit_code_and_flushes_its_output(tmp_path: Path) -> None:
    inbox, lake = tmp_path / "inbox", tmp_path / "lake"
    inbox.mkdir()
    done = _program("run", "--input", str(inbox), "--lake", str(lake))
    assert done.returncode == 0, done.stderr
    assert "no new capture files" in done.stderr
    assert done.stdout.rstrip().endswith(f"tables: {lake.resolve() / 'tables'}")
    assert "terminate called" not in done.stderr

    missing = _program("tables", "--lake", str(tmp_path / "empty"))
    assert missing.returncode == 1 and "no tables in" in missing.stdout


def test_bad_arguments_exit_2_with_usage(tmp_path: Path) -> None:
    done = _program("run", "--lake", str(tmp_path))
    assert done.returncode == 2 and "usage: stomp-lake run" in done.stderr
