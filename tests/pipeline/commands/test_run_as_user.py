"""`stomp-lake run` as a user runs it: the installed program, settings from the environment,
started from a folder of its own. What it prints, how it ends, what it leaves behind.

One sample capture and one file that is not a capture (a `.pcap` holding text): the good file
lands, the other is named in the summary with the reason and stays out of the ledger, so the
next run names it again. Nothing of Spark's start-up chatter reaches the terminal, and Spark's
scratch space goes under $TMPDIR, not into the current folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from deltalake import DeltaTable

from pipeline.lake.layout import LEDGER
from tests.conftest import SAMPLES

pytestmark = pytest.mark.spark

STOMP_LAKE = Path(sys.executable).parent / "stomp-lake"
SAMPLE = SAMPLES / "activemq-heartbeat-v10.pcap"
NOISE = (
    "WARNING: Using incubator modules",
    "log4j",
    "NativeCodeLoader",
    "spark.local.dir will be overridden",
    "Setting default log level",
    "sc.setLogLevel",
    "SQLQueryContextLogger",
)


@dataclass(frozen=True, slots=True)
class Place:
    cwd: Path
    tmpdir: Path
    lake: Path
    inbox: Path
    env: dict[str, str]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(STOMP_LAKE), "run", "--master", "local[2]", *args],
            cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Place:
    root = tmp_path_factory.mktemp("as-user")
    cwd, tmpdir, inbox = root / "cwd", root / "tmp", root / "inbox"
    for folder in (cwd, tmpdir, inbox):
        folder.mkdir()
    (inbox / SAMPLE.name).write_bytes(SAMPLE.read_bytes())
    (inbox / "notes.pcap").write_text("# not a capture\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("STOMP_LAKE_")}
    env.update(TMPDIR=str(tmpdir), STOMP_LAKE_LAKE=str(root / "lake"))
    env["STOMP_LAKE_INPUT"] = str(inbox)
    return Place(cwd, tmpdir, root / "lake", inbox, env)


@pytest.fixture(scope="module")
def first(place: Place) -> subprocess.CompletedProcess[str]:
    return place.run("--open-connections", "close")


def test_the_run_lands_the_capture_and_names_the_other_file(
    place: Place, first: subprocess.CompletedProcess[str]
) -> None:
    assert first.returncode == 0, first.stderr[-3000:]
    assert "skipped (not a capture file): 1 files" in first.stdout
    notes = (place.inbox / "notes.pcap").resolve()
    assert f"    {notes}: magic 23206e6f is neither pcap nor pcapng" in first.stdout
    ledger = DeltaTable(str(place.lake / LEDGER)).to_pyarrow_table().column("path").to_pylist()
    assert ledger == [str((place.inbox / SAMPLE.name).resolve())]
    sessions = DeltaTable(str(place.lake / "tables" / "sessions")).to_pyarrow_table()
    assert sessions.num_rows > 0


def test_nothing_of_sparks_start_up_reaches_the_terminal(
    first: subprocess.CompletedProcess[str],
) -> None:
    for noise in NOISE:
        assert noise not in first.stderr, noise
    assert all(line.startswith("[stomp-lake] ") for line in first.stderr.splitlines())


def test_scratch_space_is_under_tmpdir_never_the_current_folder(
    place: Place, first: subprocess.CompletedProcess[str]
) -> None:
    assert first.returncode == 0
    assert list(place.cwd.iterdir()) == []
    assert [p.name for p in place.tmpdir.iterdir()] == [f"stomp-lake-{os.getuid()}"]


def test_the_next_run_names_the_other_file_again_and_q_keeps_quiet(
    place: Place, first: subprocess.CompletedProcess[str]
) -> None:
    assert first.returncode == 0
    again = place.run("-q")
    assert again.returncode == 0, again.stderr
    assert again.stderr == ""
    assert "skipped (not a capture file): 1 files" in again.stdout
    assert "batch None: 0 files" in again.stdout
