"""Python scripts run in a fresh process of their own (a JVM, imports or threads as a run meets
them, not as the test session left them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_script(script: str, tmp_path: Path, *args: str) -> str:
    """Runs ``script`` from a file (with no main module file, PySpark's Connect module, which GX
    imports, takes the process for a doctest run and exits); returns its last line of output."""
    path = tmp_path / "script.py"
    path.write_text(script)
    env = dict(os.environ, PYTHONPATH=str(REPO), STOMP_LAKE_WORK=str(tmp_path / "work"))
    done = subprocess.run(
        [sys.executable, str(path), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout.strip().splitlines()[-1]
