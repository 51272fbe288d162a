"""The shell commands the DAGs' Bash tasks run: the pipeline's CLI, `stomp-lake`."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from stomp_lake_dags.settings import Settings

KILL_AT_ENV = "STOMP_LAKE_KILL_AT"  # pipeline/lake/failpoints.py (not imported: no pipeline here)


def shell(*commands: Sequence[str]) -> str:
    """The commands joined by `&&`, each echoed first so the task log shows what ran."""
    steps = []
    for command in commands:
        line = shlex.join(command)
        steps.append(f"echo {shlex.quote('+ ' + line)}")
        steps.append(line)
    return " && ".join(steps)


def maintain(settings: Settings, *arguments: str) -> list[str]:
    """`stomp-lake maintain`: its exit code 3 (lake busy) and 1 (check failed) fail the task."""
    return [
        str(settings.stomp_lake_bin), "maintain",
        "--lake", str(settings.lake), "--wait-lock", f"{settings.wait_lock_seconds:g}",
        *arguments,
    ]  # fmt: skip


def ingest(
    settings: Settings,
    files: Sequence[str],
    batch_id: str,
    listed_at: str,
    kill_at: str | None = None,
) -> str:
    """`stomp-lake run` over the files, then the ledger check whose report (the last line)
    says which batches committed them since `listed_at`, the time the files were listed.
    `kill_at`: a pipeline failpoint that kills this run (`STOMP_LAKE_KILL_AT`, tests only)."""
    run = [
        *(["env", f"{KILL_AT_ENV}={kill_at}"] if kill_at else []),
        str(settings.stomp_lake_bin), "run",
        "--input", *files,
        "--lake", str(settings.lake),
        "--batch-id", batch_id,
        "--master", settings.spark_master,
        "--wait-lock", f"{settings.wait_lock_seconds:g}",
        *settings.run_extra_args,
    ]  # fmt: skip
    check = maintain(settings, "check", "--committed-since", listed_at, *files)
    return shell(run, check)


def expire_state(settings: Settings, batch_id: str) -> str:
    """Close long-carried connections, with the ingestion's run options (body mode, login
    hashing) so their final rows are written the same way."""
    arguments = [
        "expire-state",
        "--older-than-days", f"{settings.state_expiry_days:g}",
        "--batch-id", batch_id,
        "--master", settings.spark_master,
        "--", *settings.run_extra_args,
    ]  # fmt: skip
    return shell(maintain(settings, *arguments))


def compact(settings: Settings) -> str:
    return shell(maintain(settings, "compact", "--target-mb", str(settings.compact_target_mb)))


def vacuum(settings: Settings) -> str:
    hours = str(settings.vacuum_retention_hours)
    return shell(maintain(settings, "vacuum", "--retention-hours", hours))


def retain_captures(settings: Settings) -> str:
    archive = settings.capture_archive_dir
    arguments = [
        "retain-captures",
        "--capture-dir", str(settings.capture_dir),
        "--older-than-days", f"{settings.capture_retention_days:g}",
        "--action", settings.capture_retention_action,
        *(["--archive-dir", str(archive)] if archive is not None else []),
    ]  # fmt: skip
    return shell(maintain(settings, *arguments))
