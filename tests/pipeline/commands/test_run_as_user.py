"""`stomp-lake run` as a user runs it: the installed program, settings from the environment,
started from a folder of its own. What it prints, how it ends, what it leaves behind.

One sample capture and one file that is not a capture (a `.pcap` holding text): the good file
lands, the other is named in the summary with the reason and stays out of the ledger, so the
next run names it again. Nothing of Spark's start-up chatter reaches the terminal, and Spark's
scratch space goes under $TMPDIR, not into the current folder.
"""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from deltalake import DeltaTable

from pipeline.lake.layout import LEDGER
from tests.support.paths import SAMPLES

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
    env["STOMP_LAKE_PROGRESS_SECONDS"] = "1"
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


def test_the_summary_points_at_validation_pages_that_work_offline(
    place: Place, first: subprocess.CompletedProcess[str]
) -> None:
    assert first.returncode == 0
    docs = place.lake / "docs"
    index = docs / "index.html"
    assert f"validation runs: {index}" in first.stdout
    batch_page = next(docs.glob("*/validation.html"))
    assert f"expectations passed: {batch_page}" in first.stdout
    for page in (index, batch_page):
        text = page.read_text()
        for remote in ("http:", "https:", "<script", "<link", "url("):
            assert remote not in text, (page, remote)
    assert "as expected" in batch_page.read_text()


def test_nothing_of_sparks_start_up_reaches_the_terminal(
    first: subprocess.CompletedProcess[str],
) -> None:
    for noise in NOISE:
        assert noise not in first.stderr, noise
    assert all(line.startswith("[stomp-lake] ") for line in first.stderr.splitlines())


def test_in_a_log_progress_is_a_plain_line_now_and_then(
    first: subprocess.CompletedProcess[str],
) -> None:
    lines = first.stderr.splitlines()
    stages = [i for i, line in enumerate(lines) if line.startswith("[stomp-lake] stage ")]
    assert len(stages) == 4
    updates = [line for line in lines if re.match(r"\[stomp-lake\]   stage \d/4", line)]
    assert any(re.search(r"\d+ Spark jobs done", line) for line in updates), first.stderr
    assert any(line.startswith("[stomp-lake]   stage 1/4 done: 1/1 files") for line in updates)
    assert all(re.search(r", \d+ s$", line) for line in updates)
    assert len(updates) <= 2 * len(lines)  # not a line per poll


def test_on_a_terminal_progress_is_a_live_display(place: Place, tmp_path: Path) -> None:
    """The same command on a pseudo-terminal: rich draws a line per stage with a bar of the
    running Spark tasks and ticks each stage off."""
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / SAMPLE.name).write_bytes(SAMPLE.read_bytes())
    env = dict(place.env, STOMP_LAKE_INPUT=str(inbox), STOMP_LAKE_LAKE=str(tmp_path / "lake"))
    env.update(TERM="xterm-256color", COLUMNS="120")
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [str(STOMP_LAKE), "run", "--master", "local[2]", "--no-validate"],
        cwd=place.cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=follower,
    )  # fmt: skip
    os.close(follower)
    screen = bytearray()
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the last writer closed the terminal
            break
        if not chunk:
            break
        screen += chunk
    os.close(leader)
    stdout = process.communicate(timeout=600)[0].decode()
    text = screen.decode("utf-8", "replace")
    assert process.returncode == 0, text[-3000:]
    assert "tables:" in stdout
    assert "\x1b[" in text  # drawn, not printed
    for stage in ("stage 1/4", "stage 2/4", "stage 3/4", "stage 4/4"):
        assert stage in text
    assert "━" in text and "✓" in text and " jobs" in text
    assert "1/1 files" in text and " flows, " in text and " tables" in text


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


def test_other_engines_read_every_table_with_its_descriptions(
    place: Place, first: subprocess.CompletedProcess[str]
) -> None:
    """delta-rs, Polars and DuckDB (offline, `duckdb_connect`) on every table the run wrote;
    each column's description is Delta's `comment`, shown by delta-rs and DuckDB."""
    import polars

    import schemas
    from pipeline.lake import duckdb_connect

    assert first.returncode == 0
    con = duckdb_connect(place.lake)
    for name in schemas.TABLES:
        path = place.lake / "tables" / name
        table = DeltaTable(str(path))
        described = schemas.load(name).columns
        comments = {f.name: f.metadata.get("comment") for f in table.schema().fields}
        assert comments == {c.name: c.description for c in described}, name
        rows = table.to_pyarrow_table().num_rows
        assert polars.read_delta(table).height == rows, name
        assert con.sql(f'SELECT count(*) FROM "{name}"').fetchone() == (rows,), name
        shown = con.sql(
            f"SELECT column_name, comment FROM duckdb_columns() WHERE table_name = '{name}'"
        ).fetchall()
        assert dict(shown) == {c.name: c.description for c in described}, name
