from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from stomp_lake_dags import commands
from stomp_lake_dags.settings import env_lookup, load_settings

ENV = {
    "STOMP_LAKE_CAPTURE_DIR": "/data/captures",
    "STOMP_LAKE_LAKE": "/data/lake",
    "STOMP_LAKE_BIN": "/opt/pipeline/bin/stomp-lake",
    "STOMP_LAKE_RUN_EXTRA_ARGS": "--body preview:64 --hash-logins '/etc/stomp lake/key'",
    "STOMP_LAKE_WAIT_LOCK_SECONDS": "90",
}
SETTINGS = load_settings(env_lookup(ENV), spark_master="spark://m:7077")


def steps(script: str) -> list[list[str]]:
    """The commands of a script made by `commands.shell`, without their echo lines."""
    parts = [shlex.split(step) for step in script.split(" && ")]
    return [p for p in parts if p[0] != "echo"]


def test_ingest_runs_the_pipeline_then_the_ledger_check() -> None:
    files = ["/data/captures/a b.pcap", "/data/captures/c.pcapng"]
    run, check = steps(commands.ingest(SETTINGS, files, "ivl-1", "2026-11-20T10:00:01+00:00"))
    assert run == [
        "/opt/pipeline/bin/stomp-lake", "run", "--input", *files, "--lake", "/data/lake",
        "--batch-id", "ivl-1", "--master", "spark://m:7077", "--wait-lock", "90",
        "--body", "preview:64", "--hash-logins", "/etc/stomp lake/key",
    ]  # fmt: skip
    assert check == [
        "/opt/pipeline/bin/stomp-lake", "maintain", "--lake", "/data/lake",
        "--wait-lock", "90", "check", "--committed-since", "2026-11-20T10:00:01+00:00", *files,
    ]  # fmt: skip


def test_expiry_uses_the_ingestion_run_options() -> None:
    (command,) = steps(commands.expire_state(SETTINGS, "expire-1"))
    assert command[command.index("--master") + 1] == "spark://m:7077"
    assert command[command.index("--batch-id") + 1] == "expire-1"
    after = command[command.index("--") + 1 :]
    assert after == ["--body", "preview:64", "--hash-logins", "/etc/stomp lake/key"]


def test_retention_passes_the_archive_only_when_set() -> None:
    (command,) = steps(commands.retain_captures(SETTINGS))
    assert "--archive-dir" not in command
    moving = load_settings(
        env_lookup(
            {**ENV, "STOMP_LAKE_CAPTURE_RETENTION": "move", "STOMP_LAKE_CAPTURE_ARCHIVE_DIR": "/a"}
        )
    )
    (command,) = steps(commands.retain_captures(moving))
    assert command[-2:] == ["--archive-dir", "/a"]
    assert command[command.index("--action") + 1] == "move"


def test_each_command_is_echoed_then_run_and_stops_at_the_first_failure(tmp_path: Path) -> None:
    marker = tmp_path / "ran twice"
    script = commands.shell(["false"], ["touch", str(marker)])
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert done.stdout == "+ false\n"
    assert not marker.exists()


def test_a_failpoint_runs_only_the_pipeline_under_stomp_lake_kill_at() -> None:
    files = ["/data/captures/a.pcap"]
    script = commands.ingest(SETTINGS, files, "ivl-1", "2026-11-20T10:00:01+00:00", "lake.placed")
    run, check = steps(script)
    assert run[:3] == ["env", "STOMP_LAKE_KILL_AT=lake.placed", "/opt/pipeline/bin/stomp-lake"]
    assert check[:2] == ["/opt/pipeline/bin/stomp-lake", "maintain"]
