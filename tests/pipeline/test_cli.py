"""The installed `stomp-lake` as a user runs it: exit codes, what it prints, what it leaves."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import REPO

STOMP_LAKE = Path(sys.executable).parent / "stomp-lake"
NO_SPARK_S = 15  # an answer before the JVM could even have started


def _program(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(STOMP_LAKE), *args], capture_output=True, text=True, timeout=120, check=False, cwd=cwd
    )


def test_bad_arguments_exit_2_with_usage(tmp_path: Path) -> None:
    done = _program("run", "--lake", str(tmp_path))
    assert done.returncode == 2 and "usage: stomp-lake run" in done.stderr


def test_a_missing_input_exits_2_naming_it_and_leaves_nothing(tmp_path: Path) -> None:
    lake, missing = tmp_path / "lake", tmp_path / "nonexist"
    started = time.monotonic()
    done = _program("run", "--input", str(missing), "--lake", str(lake), cwd=tmp_path)
    assert time.monotonic() - started < NO_SPARK_S
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == f"stomp-lake run: no such file or directory: {missing}"
    assert "terminate called" not in done.stderr
    assert done.stdout == ""
    assert list(tmp_path.iterdir()) == []  # no lake, no ./work, no ./spark-warehouse


def test_an_input_without_capture_files_exits_2_naming_it(tmp_path: Path) -> None:
    inbox, lake = tmp_path / "inbox", tmp_path / "lake"
    inbox.mkdir()
    (inbox / "README.txt").write_text("not here")
    done = _program("run", "--input", str(inbox), "--lake", str(lake))
    assert done.returncode == 2
    assert f"no capture files (.pcap, .pcapng, .cap, .dmp) in {inbox}" in done.stderr
    assert not lake.exists()


def test_a_file_that_is_not_a_capture_exits_2_with_the_reason(tmp_path: Path) -> None:
    document = REPO / "docs" / "security.md"
    started = time.monotonic()
    done = _program("run", "--input", str(document), "--lake", str(tmp_path / "lake"))
    assert time.monotonic() - started < NO_SPARK_S
    assert done.returncode == 2
    head = document.read_bytes()[:4].hex()
    assert f"{document}: magic {head} is neither pcap nor pcapng" in done.stderr
    assert "not a capture file" in done.stderr


def test_tables_of_a_missing_lake_exit_1(tmp_path: Path) -> None:
    missing = _program("tables", "--lake", str(tmp_path / "empty"))
    assert missing.returncode == 1 and "no tables in" in missing.stdout
