"""The installed `stomp-lake` as a user runs it: exit codes, what it prints, what it leaves."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.paths import REPO

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


def test_version_and_every_commands_help_say_what_it_does_and_its_exit_codes() -> None:
    version = _program("--version")
    assert version.returncode == 0 and version.stdout.strip() == "stomp-lake 0.1.0"
    top = _program("--help")
    commands = ["run", "demo", "tables", "quarantine", "sql", "audit", "report"]
    for command in commands:
        assert re.search(rf"^    {command}\s", top.stdout, re.MULTILINE)
        shown = _program(command, "--help")
        assert shown.returncode == 0
        text = shown.stdout
        usage, _, rest = text.partition("\n\n")
        assert usage.startswith(f"usage: stomp-lake {command}") and "-q | -v" in usage
        assert rest.split("\n")[0] and not rest.startswith("options:")  # a description
        assert "\nexit codes:\n  0  done" in text
    run_help = _program("run", "--help").stdout
    assert "(default 61613,61614)" in run_help and "(61613, 61614)" not in run_help
    assert "$STOMP_LAKE_LAKE" in run_help and "$STOMP_LAKE_INPUT" in run_help
    assert "  4  the batch failed validation" in run_help


def test_lake_and_input_come_from_the_environment(tmp_path: Path) -> None:
    missing = tmp_path / "from-env"
    env = dict(os.environ, STOMP_LAKE_INPUT=str(missing), STOMP_LAKE_LAKE=str(tmp_path / "L"))
    done = subprocess.run(
        [str(STOMP_LAKE), "run"], capture_output=True, text=True, timeout=60, env=env, check=False
    )
    assert done.returncode == 2
    assert done.stderr.strip() == f"stomp-lake run: no such file or directory: {missing}"
    bad_conf = _program("run", "--input", "x", "--lake", "y", "--conf", "no-equals-sign")
    assert bad_conf.returncode == 2 and "expected KEY=VALUE" in bad_conf.stderr


@pytest.mark.spark
@pytest.mark.slow
def test_the_demo_the_readme_starts_with_ingests_the_samples_and_says_where(tmp_path: Path) -> None:
    """`make demo` runs `stomp-lake demo --lake work/lake`: the bundled samples end to end."""
    lake = tmp_path / "lake"
    done = subprocess.run(
        [str(STOMP_LAKE), "demo", "--lake", str(lake)],
        capture_output=True, text=True, timeout=900, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"tables: {lake.resolve() / 'tables'}" in done.stdout
    assert "query them:" in done.stdout
    assert (lake / "tables" / "sessions" / "_delta_log").is_dir()
