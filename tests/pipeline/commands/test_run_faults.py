"""`stomp-lake run` killed by SIGKILL at the moments that matter, then run again; and two runs
started at once on one lake.

Every run is a real `stomp-lake run` subprocess over the bundled samples. The kills form one
chain on one lake: each run resumes what the killed one before it left and is itself killed
further on (a Spark run costs ~30 s, so a chain covers each failpoint with one run instead of
two). After each kill: every table is all or nothing (equal to an uninterrupted run's, or not
there), and what the previous killed run left behind is gone. After the last, a run without a
kill: every table equals the uninterrupted run's, minus `batch_id`, with no file on disk that
the Delta log does not reference, no staging left-over and no pending batch.

Tables are read with delta-rs (no Spark in the test process).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from pipeline.lake.failpoints import KILL_AT_ENV, parse_kill_at
from pipeline.lake.layout import DELTA_LOG, LEDGER, STAGING
from tests.support.paths import REPO, SAMPLES

pytestmark = [pytest.mark.spark, pytest.mark.slow]

STOMP_LAKE = REPO / ".venv" / "bin" / "stomp-lake"
SAMPLE_FILES = len(list(SAMPLES.glob("*.pcap*")))  # five: four over TCP, one WebSocket
CLOSE = ("--open-connections", "close")
NO_VALIDATE = ("--no-validate",)
EXIT_BUSY = 3
RUN_TIMEOUT_S = 600


# --- running stomp-lake ------------------------------------------------------------------------


@dataclass
class Run:
    process: subprocess.Popen[str]
    stderr: list[str] = field(default_factory=list)
    reader: threading.Thread | None = None

    def wait_for_line(self, text: str, timeout: float = RUN_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in list(self.stderr)):
            assert self.process.poll() is None, f"run ended first:\n{self.log}"
            assert time.monotonic() < deadline, f"never printed {text!r}:\n{self.log}"
            time.sleep(0.05)

    def finish(self, timeout: float = RUN_TIMEOUT_S) -> int:
        try:
            code = self.process.wait(timeout)
        finally:
            # a driver killed by SIGKILL cannot stop its Spark JVM and Python workers; they end
            # on their own when its pipes close, and this makes sure of it
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
        if self.reader is not None:  # it takes the last lines, until every writer is gone
            self.reader.join(timeout=30)
        return code

    @property
    def log(self) -> str:
        return "\n".join(line for line in self.stderr if "WARN" not in line)[-4000:]


def start(lake: Path, work: Path, *args: str, kill_at: str | None = None) -> Run:
    env = {key: value for key, value in os.environ.items() if key != KILL_AT_ENV}
    env["STOMP_LAKE_WORK"] = str(work)
    if kill_at is not None:
        env[KILL_AT_ENV] = kill_at
    process = subprocess.Popen(
        [str(STOMP_LAKE), "run", "--input", str(SAMPLES), "--lake", str(lake),
         "--master", "local[2]", *args],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )
    run = Run(process)

    def collect() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            run.stderr.append(line.rstrip("\n"))

    run.reader = threading.Thread(target=collect, daemon=True)
    run.reader.start()
    return run


# --- what a lake holds, read with delta-rs -------------------------------------------------------


def table_rows(lake: Path, table: str) -> list[str] | None:
    """The table's rows without batch_id, as sorted text; None when there is no table."""
    path = lake / "tables" / table
    if not DeltaTable.is_deltatable(str(path)):
        return None
    data = DeltaTable(str(path)).to_pyarrow_table()
    if "batch_id" in data.column_names:
        data = data.drop_columns(["batch_id"])
    return sorted(repr(sorted(row.items())) for row in data.to_pylist())


def ledger_paths(lake: Path) -> list[str]:
    path = lake / LEDGER
    if not DeltaTable.is_deltatable(str(path)):
        return []
    return sorted(DeltaTable(str(path)).to_pyarrow_table().column("path").to_pylist())


def referenced(path: Path) -> set[str]:
    if not DeltaTable.is_deltatable(str(path)):
        return set()
    actions = pa.table(DeltaTable(str(path)).get_add_actions())
    return {unquote(p) for p in actions.column("path").to_pylist()}


def leftovers(lake: Path) -> set[str]:
    """Staging folders, temporary commits, and Parquet files the Delta log does not add."""
    found: set[str] = set()
    roots = [*sorted((lake / "tables").iterdir()), lake / LEDGER]
    for root in (r for r in roots if r.is_dir()):
        known = referenced(root)
        found.update(
            str(entry)
            for entry in root.rglob("*")
            if _left_over(entry.relative_to(root), known)
        )
    return found


def _left_over(relative: Path, known: set[str]) -> bool:
    top = relative.parts[0]
    if top == STAGING:
        return len(relative.parts) == 2
    if top == DELTA_LOG:
        return relative.name.endswith(".tmp")
    return relative.suffix == ".parquet" and top[0] not in "_." and (
        relative.as_posix() not in known
    )


def pending(lake: Path) -> bool:
    return (lake / "_state" / "pending-batch.json").exists()


# --- the uninterrupted run, with two more started while it holds the lake -----------------------


@dataclass
class Reference:
    lake: Path
    tables: dict[str, list[str]]
    first: Run
    refused: Run
    waiting: Run
    codes: dict[str, int]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reference]:
    lake = tmp_path_factory.mktemp("reference-lake")
    work = tmp_path_factory.mktemp("reference-work")
    first = start(lake, work, *CLOSE, *NO_VALIDATE)
    runs = [first]
    try:
        first.wait_for_line("[stomp-lake] batch ")  # it holds the lock from here on
        refused = start(lake, work, *CLOSE, *NO_VALIDATE)
        runs.append(refused)
        refused_code = refused.finish(60)
        waiting = start(lake, work, "--wait-lock", str(RUN_TIMEOUT_S), *NO_VALIDATE)
        runs.append(waiting)
        codes = {"first": first.finish(), "refused": refused_code, "waiting": waiting.finish()}
    finally:
        for run in runs:
            if run.process.poll() is None:
                run.process.kill()
                run.finish()
    tables = sorted(p.name for p in (lake / "tables").iterdir())
    yield Reference(
        lake, {t: table_rows(lake, t) or [] for t in tables}, first, refused, waiting, codes
    )


def test_a_second_run_is_refused_and_a_waiting_one_goes_after(reference: Reference) -> None:
    assert reference.codes["first"] == 0, reference.first.log
    assert reference.codes["refused"] == EXIT_BUSY, reference.refused.log
    message = reference.refused.log
    assert "is busy" in message and f"pid {reference.first.process.pid}" in message
    assert "Traceback" not in message
    assert reference.codes["waiting"] == 0, reference.waiting.log
    # started while the first held the lake, it found the files already ingested: it waited
    assert any("no new capture files" in line for line in reference.waiting.stderr)
    # one batch, committed once everywhere
    assert len(ledger_paths(reference.lake)) == SAMPLE_FILES
    assert reference.tables["sessions"] and reference.tables["frames"]
    for table in reference.tables:
        assert DeltaTable(str(reference.lake / "tables" / table)).version() == 0, table
    assert leftovers(reference.lake) == set() and not pending(reference.lake)


# --- the chain of killed runs ------------------------------------------------------------------


@dataclass
class Chain:
    lake: Path
    work: Path
    left_by_last_kill: set[str] = field(default_factory=set)


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Chain:
    return Chain(tmp_path_factory.mktemp("killed-lake"), tmp_path_factory.mktemp("killed-work"))


# In run order. Tables are committed one by one after all are staged and validated; each
# resumed run skips the tables already holding the batch, so `:N` counts the tables this run
# commits.
KILLS = [
    pytest.param("run.batch_begun", False, id="batch-begun"),
    pytest.param("lake.staged:3", False, id="parquet-written-before-placing"),
    pytest.param("lake.committed:2", False, id="after-a-commit-before-staging-is-released"),
    pytest.param("lake.placed:2", True, id="validated-between-two-table-commits"),
    pytest.param("ledger.placed", False, id="ledger-file-written-not-committed"),
    pytest.param("run.ledger_recorded", False, id="ledger-committed-state-not-advanced"),
    pytest.param("run.advanced", False, id="state-advanced-batch-not-finished"),
]


@pytest.mark.parametrize(("kill_at", "validate"), KILLS)
def test_a_run_killed_at(
    reference: Reference, chain: Chain, kill_at: str, validate: bool
) -> None:
    before = chain.left_by_last_kill
    run = start(chain.lake, chain.work, *CLOSE, *(() if validate else NO_VALIDATE),
                kill_at=kill_at)
    assert run.finish() == -signal.SIGKILL, run.log
    name, count = parse_kill_at(kill_at)
    assert any(f"failpoint {name}:{count} reached" in line for line in run.stderr), run.log

    after = leftovers(chain.lake)
    if name != "run.batch_begun":  # every other point comes after the run's cleanup
        assert not before & after, "files of the killed run before outlived this run"
    chain.left_by_last_kill = after
    tables = {t: table_rows(chain.lake, t) for t in reference.tables}
    for table, rows in tables.items():
        assert rows is None or rows == reference.tables[table], f"{table} is half written"
    recorded = ledger_paths(chain.lake)
    assert recorded in ([], ledger_paths(reference.lake))
    if recorded:
        assert all(rows is not None for rows in tables.values()), "ledger ahead of the tables"
    assert pending(chain.lake)


def test_the_run_after_the_kills_equals_an_uninterrupted_run(
    reference: Reference, chain: Chain
) -> None:
    run = start(chain.lake, chain.work, *CLOSE, *NO_VALIDATE)
    assert run.finish() == 0, run.log
    for table, rows in reference.tables.items():
        assert table_rows(chain.lake, table) == rows, table
    assert ledger_paths(chain.lake) == ledger_paths(reference.lake)
    assert leftovers(chain.lake) == set()
    assert not pending(chain.lake)

    again = start(chain.lake, chain.work, *NO_VALIDATE)
    assert again.finish() == 0, again.log
    assert any("no new capture files" in line for line in again.stderr), again.log
