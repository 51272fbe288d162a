"""`stomp-lake run` with a `--lake` it cannot use: one line and exit 2, no traceback (the real
command in a subprocess; it stops before Spark starts)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO, SAMPLES


def _run(lake: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), STOMP_LAKE_WORK=str(tmp_path / "work"))
    command = [sys.executable, "-m", "pipeline.cli", "run", "--input", str(SAMPLES)]
    command += ["--lake", str(lake), "--no-validate"]
    return subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize("where", ["under_a_file", "the_file_itself", "percent"])
def test_bad_lake_gives_one_line_and_exit_2(tmp_path: Path, where: str) -> None:
    plain = tmp_path / "plain"
    plain.write_text("a regular file")
    lake = {
        "under_a_file": plain / "lake",
        "the_file_itself": plain,
        "percent": tmp_path / "lake%41",
    }[where]
    done = _run(lake, tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and str(lake) in lines[0], done.stderr
    assert not (tmp_path / "lake%41").exists()
