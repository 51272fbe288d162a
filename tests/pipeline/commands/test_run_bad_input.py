"""`stomp-lake run` over bad captures mixed with the good samples (tests/data/malformed/).

Two lakes, made once: the good samples alone (in-process), and the samples plus every malformed
file (the real command in a subprocess, its stdout and stderr kept, Spark's own logging
included). The mixed run must finish, record each bad file's problem with its file and byte
offset, leave the good files' rows exactly as the good run made them, and never show a passcode.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from subprocess import STDOUT, Popen

import pytest
from deltalake import DeltaTable

import schemas
from pipeline.lake import Lake
from pipeline.runner import RunConfig, run
from tests.support.paths import DATA, REPO, SAMPLES

pytestmark = pytest.mark.spark

MALFORMED = DATA / "malformed"
EXPECTED: dict[str, list[dict]] = json.loads((MALFORMED / "expected.json").read_text())
GOOD = sorted(SAMPLES.glob("*.pcap*"))
BAD = sorted(MALFORMED.glob("*.pcap"))
GOOD_NAMES = {path.name for path in GOOD}


@dataclass(slots=True)
class MixedRun:
    lake: Lake
    returncode: int
    output: str  # stdout and stderr, Spark's logging included


def _rows(lake: Lake, table: str) -> list[dict]:
    path = lake.table_path(table)
    if not (path / "_delta_log").is_dir():
        return []
    return DeltaTable(str(path)).to_pyarrow_table().to_pylist()


@pytest.fixture(scope="module")
def mixed_process(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Popen, Lake, Path]]:
    """The mixed run, started first so that it overlaps the good run."""
    inbox = tmp_path_factory.mktemp("mixed-inbox")
    for path in [*GOOD, *BAD]:
        shutil.copy(path, inbox)
    root = tmp_path_factory.mktemp("mixed-lake") / "lake"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env["STOMP_LAKE_WORK"] = str(tmp_path_factory.mktemp("mixed-work"))
    command = [sys.executable, "-m", "pipeline.cli", "run", "--input", str(inbox)]
    command += ["--lake", str(root), "--open-connections", "close", "--no-validate"]
    command += ["--master", "local[1]"]
    log = tmp_path_factory.mktemp("mixed-log") / "output.txt"
    with log.open("wb") as sink:
        process = Popen(command, cwd=REPO, env=env, stdout=sink, stderr=STDOUT)
    yield process, Lake(root), log
    if process.poll() is None:
        process.kill()
        process.wait()


@pytest.fixture(scope="module")
def good_lake(spark, mixed_process, tmp_path_factory: pytest.TempPathFactory) -> Lake:
    inbox = tmp_path_factory.mktemp("good-inbox")
    for path in GOOD:
        shutil.copy(path, inbox)
    root = tmp_path_factory.mktemp("good-lake")
    result = run(
        RunConfig(inputs=[inbox], lake=root, close_open=True, validate=False),
        progress=lambda _: None,
    )
    assert result.files == len(GOOD)
    return Lake(root)


@pytest.fixture(scope="module")
def mixed(mixed_process: tuple[Popen, Lake, Path], good_lake: Lake) -> MixedRun:
    process, lake, log = mixed_process
    process.wait(timeout=600)
    return MixedRun(lake, process.returncode, log.read_text(errors="replace"))


def test_the_run_finishes_and_ingests_every_file(mixed: MixedRun) -> None:
    assert mixed.returncode == 0, mixed.output[-3000:]
    assert f": {len(GOOD) + len(BAD)} files in " in mixed.output


@pytest.mark.parametrize(
    ("name", "expected"),
    [(name, item) for name, items in sorted(EXPECTED.items()) for item in items],
    ids=lambda value: value if isinstance(value, str) else value["kind"],
)
def test_each_bad_file_problem_is_recorded_with_file_and_offset(
    mixed: MixedRun, name: str, expected: dict
) -> None:
    size = (MALFORMED / name).stat().st_size
    found = [
        row
        for row in _rows(mixed.lake, "anomalies")
        if row["file"] is not None
        and Path(row["file"]).name == name
        and (row["source"], row["kind"]) == (expected["source"], expected["kind"])
    ]
    assert found, f"no {expected['source']}/{expected['kind']} anomaly for {name}"
    if expected["file_offset"] is not None:
        assert expected["file_offset"] in {row["file_offset"] for row in found}
    assert all(row["file_offset"] is not None and 0 <= row["file_offset"] < size for row in found)


def test_every_bad_file_left_a_mark(mixed: MixedRun) -> None:
    marked = {Path(r["file"]).name for r in _rows(mixed.lake, "anomalies") if r["file"]}
    assert {path.name for path in BAD} <= marked


def _comparable(table: str, rows: list[dict], keep: set[str]) -> list[str]:
    """Rows of the good files only (their sessions; for capture anomalies, their file names),
    without the columns that differ between the two runs: the batch, the folder of the file."""
    out = []
    for row in rows:
        if not _of_good_files(table, row, keep):
            continue
        row = dict(row)
        row.pop("batch_id", None)
        if row.get("file") is not None:
            row["file"] = Path(row["file"]).name
        out.append(repr(sorted(row.items())))
    return sorted(out)


def _of_good_files(table: str, row: dict, sessions: set[str]) -> bool:
    if row.get("session_id") is not None:
        return row["session_id"] in sessions
    file = row.get("file") if table == "anomalies" else None
    return file is not None and Path(file).name in GOOD_NAMES


# Every table, websocket_controls too: the WebSocket sample gives it rows (its closes).
SAMPLE_TABLES = list(schemas.TABLES)


@pytest.mark.parametrize("table", SAMPLE_TABLES)
def test_good_files_rows_are_as_without_the_bad_ones(
    good_lake: Lake, mixed: MixedRun, table: str
) -> None:
    good_sessions = {row["session_id"] for row in _rows(good_lake, "sessions")}
    mixed_sessions = {row["session_id"] for row in _rows(mixed.lake, "sessions")}
    assert good_sessions < mixed_sessions  # the bad files added sessions of their own
    alone = _comparable(table, _rows(good_lake, table), good_sessions)
    among_bad = _comparable(table, _rows(mixed.lake, table), good_sessions)
    assert alone  # every table has rows from the samples: the comparison is not vacuous
    assert among_bad == alone


# -- passcodes ----------------------------------------------------------------------------------

_PASSCODE = re.compile(rb"\npasscode:([^\n\r\x00]+)")
_LOGIN = re.compile(rb"\nlogin:([^\n\r\x00]+)")


def _passcodes(paths: list[Path]) -> set[str]:
    """Passcodes sent in the captures; one equal to a login is left out (tables show logins)."""
    found: set[bytes] = set()
    logins: set[bytes] = set()
    for path in paths:
        data = path.read_bytes()
        found.update(_PASSCODE.findall(data))
        logins.update(_LOGIN.findall(data))
    texts = {value.decode("utf-8", "replace") for value in found - logins if len(value) >= 4}
    return {text for text in texts if "\ufffd" not in text}


def _all_text(lake: Lake) -> Iterator[tuple[str, str]]:
    for table in schemas.TABLES:
        for row in _rows(lake, table):
            yield table, repr(row)


def test_the_captures_hold_passcodes_to_look_for() -> None:
    passcodes = _passcodes([*GOOD, *BAD])
    assert "wrong-passcode" in passcodes
    assert sum(value.startswith("S3cret-") for value in passcodes) >= 5


def test_passcodes_never_appear_in_tables_or_output(mixed: MixedRun) -> None:
    passcodes = _passcodes([*GOOD, *BAD])
    assert mixed.output.strip(), "the run printed nothing: the check would prove nothing"
    for value in passcodes:
        assert value not in mixed.output
    for table, text in _all_text(mixed.lake):
        for value in passcodes:
            assert value not in text, f"{table}: {value}"
    for frame in _rows(mixed.lake, "frames"):
        for name, value in frame["header_list"]:
            if name.lower() == "passcode":
                assert value == "***"


def test_a_failing_run_shows_no_passcode_either(
    spark, tmp_path: Path, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # State carried from an earlier run that no longer unpickles: the per-flow pass fails in
    # the middle of decoding sessions whose CONNECT frames carry passcodes.
    import pyarrow as pa
    import pyarrow.parquet as pq

    lake = Lake(tmp_path / "lake").ensure()
    state = lake.state_dir / "connections"
    (state / "b-earlier").mkdir(parents=True)
    pq.write_table(
        pa.table({"flow_key": ["127.0.0.1|1|127.0.0.1|61613"], "state": [b"not a pickle"]}),
        state / "b-earlier" / "part-0.parquet",
    )
    (state / "current.json").write_text(json.dumps({"batch_id": "b-earlier"}))
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    for path in [*GOOD, MALFORMED / "truncated.pcap"]:
        shutil.copy(path, inbox)
    messages: list[str] = []
    with pytest.raises(Exception) as failure:  # noqa: PT011 - any failure; its text is the point
        run(
            RunConfig(inputs=[inbox], lake=lake.root, close_open=True, validate=False),
            progress=messages.append,
        )
    text = "".join(traceback.format_exception(failure.value))
    assert "pickle" in text.lower()  # it failed where intended
    captured = capfd.readouterr()
    shown = "\n".join([text, captured.out, captured.err, caplog.text, *messages])
    for value in _passcodes([*GOOD, MALFORMED / "truncated.pcap"]):
        assert value not in shown


# -- file modes ---------------------------------------------------------------------------------


def _loose(root: Path) -> list[str]:
    """Paths under root that others may read, or the group may write; under _state, that the
    group may read at all."""
    out = []
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            mode = stat.S_IMODE(path.lstat().st_mode)
            secret = "_state" in path.relative_to(root).parts
            if mode & 0o007 or mode & 0o020 or (secret and mode & 0o070):
                out.append(f"{oct(mode)} {path.relative_to(root)}")
    return out


def test_the_lake_is_private_to_owner_and_group(good_lake: Lake, mixed: MixedRun) -> None:
    assert mixed.returncode == 0
    for lake in (good_lake, mixed.lake):
        assert _loose(lake.root) == []
