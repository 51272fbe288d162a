"""Nothing leaked, everything private, whatever path a batch takes: the real `stomp-lake run` over
the crafted credential corpus (tests/data/credentials/), validated, then forced into quarantine
(suites that fail), then the lake's maintenance. Every file under the lake (Parquet read back),
and the commands' stdout and stderr, are searched for the passcodes; every path's mode checked."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipeline.validation.suites import SUITES_DIR_VARIABLE
from tests.support.paths import DATA, REPO

pytestmark = pytest.mark.spark

CORPUS = DATA / "credentials"
SECRETS = json.loads((CORPUS / "secrets.json").read_text())["secrets"]
# Suites that fail on every row: the gate prints and saves sample rows with their headers.
FAILING = {
    name: {
        "name": name,
        "expectations": [
            {"type": "expect_column_values_to_be_null", "kwargs": {"column": "session_id"}}
        ],
    }
    for name in ("frames", "errors", "sessions")
}


def _command(args: list[str], work: Path, env: dict[str, str] | None = None) -> str:
    environment = dict(os.environ, PYTHONPATH=str(REPO), STOMP_LAKE_WORK=str(work))
    environment.update(env or {})
    done = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    return f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"


def _run(lake: Path, work: Path, body: str, env: dict[str, str] | None = None) -> str:
    args = ["run", "--input", str(CORPUS), "--lake", str(lake), "--master", "local[1]"]
    args += ["--open-connections", "close", "--body", body]
    return _command(args, work, env)


def _leaks(text: str, where: str) -> list[str]:
    return [f"{secret} in {where}" for secret in SECRETS if secret in text]


def _leaks_in_lake(root: Path) -> list[str]:
    """Secrets in any file under the lake; Parquet is read back (its pages are compressed)."""
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        where = str(path.relative_to(root))
        raw = path.read_bytes()
        found += [f"{s} in {where}" for s in SECRETS if s.encode() in raw]
        if path.suffix == ".parquet":
            found += _leaks(repr(pq.read_table(path).to_pylist()), where)
    return found


def _loose(root: Path) -> list[str]:
    """Paths others may read, or not exactly the private modes (folders 0750 and files 0640;
    0700 and 0600 allowed: stricter)."""
    out = []
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            mode = stat.S_IMODE(path.lstat().st_mode)
            allowed = (0o750, 0o700) if path.is_dir() else (0o640, 0o600)
            if mode not in allowed:
                out.append(f"{oct(mode)} {path.relative_to(root)}")
    return out


@pytest.fixture(scope="module")
def validated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("validated") / "lake"
    output = _run(root, tmp_path_factory.mktemp("work"), "full")
    return root, output


@pytest.fixture(scope="module")
def quarantined(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    suites = tmp_path_factory.mktemp("suites")
    for name, suite in FAILING.items():
        (suites / f"{name}.json").write_text(json.dumps(suite))
    root = tmp_path_factory.mktemp("quarantined") / "lake"
    work = tmp_path_factory.mktemp("work")
    output = _run(root, work, "preview:200", {SUITES_DIR_VARIABLE: str(suites)})
    output += _command(["quarantine", "--lake", str(root)], work)
    batch = next((root / "_quarantine").iterdir()).name
    output += _command(["quarantine", "--lake", str(root), "--show", batch], work)
    return root, output


def test_corpus_is_what_its_readme_says() -> None:
    raw = (CORPUS / "credentials.pcap").read_bytes()
    assert all(secret.encode() in raw for secret in SECRETS)


def test_validated_run_leaks_no_passcode(validated: tuple[Path, str]) -> None:
    root, output = validated
    assert output.startswith("exit 0"), output[-3000:]
    assert (root / "docs" / "index.html").is_file()
    assert (root / "tables" / "frames" / "_delta_log").is_dir()
    assert _leaks(output, "the run's output") + _leaks_in_lake(root) == []


def test_quarantined_run_leaks_no_passcode(quarantined: tuple[Path, str]) -> None:
    root, output = quarantined
    assert output.startswith("exit 4"), output[-3000:]
    assert "frames" in output and "session_id" in output  # the samples were printed
    folder = next((root / "_quarantine").iterdir())
    assert (folder / "report.json").is_file() and any(folder.rglob("*.parquet"))
    assert _leaks(output, "the run's output") + _leaks_in_lake(root) == []


def test_every_path_is_private_after_validated_and_quarantined_runs(
    validated: tuple[Path, str], quarantined: tuple[Path, str]
) -> None:
    for root, _ in (validated, quarantined):
        assert _loose(root) == []


def test_every_path_is_private_after_maintenance(validated: tuple[Path, str]) -> None:
    root, _ = validated
    script = (
        "import os, sys; os.umask(0o022)\n"
        "from pipeline.lake import Lake, compact, vacuum\n"
        "lake = Lake(sys.argv[1])\n"
        "for table in lake.table_names():\n"
        "    compact(lake, table, target_file_mb=1)\n"
        "    vacuum(lake, table, retention_hours=0)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    subprocess.run([sys.executable, "-c", script, str(root)], cwd=REPO, env=env, check=True)
    assert _loose(root) == []
    assert _leaks_in_lake(root) == []


def test_websocket_placements_are_stored_masked(validated: tuple[Path, str]) -> None:
    """The WebSocket connections were decoded (not skipped): their URL and close reasons are
    in the tables, with the credentials as ``***`` and the rest as sent."""
    root, _ = validated
    sessions = pq.read_table(root / "tables" / "sessions").to_pylist()
    paths = sorted(row["ws_path"] for row in sessions if row["transport"] == "websocket")
    assert paths == [
        "/stomp?token=***&token=***&passcode&pass=***#access_token=***&state=1",
        "/ws?login=guest&passcode=***&password=***&pass=***&token=***&access_token=***&x=1",
        "/ws?pass%77ord=***&%70asscode=***&Access%5FToken=***",
    ]
    controls = pq.read_table(root / "tables" / "websocket_controls").to_pylist()
    reasons = {row["close_reason"] for row in controls}
    assert reasons == {
        "passcode:***",
        "Authentication failed password=***",
        "PASSCODE = ***",
        "bye",
        "token: ***",
        "going away",
    }
