"""`stomp-lake maintain`: checks and upkeep of the lake for a scheduler (the Airflow DAGs).

  check [--committed-since ISO] FILE...   every file in the ledger, and which batches took them
  compact [--target-mb N]                 merge the small files of every table and the ledger
  vacuum --retention-hours H              delete files no version younger than H hours uses
  expire-state --older-than-days D --batch-id ID [--master M] [-- RUN_OPTION...]
                                          close connections carried for D days (a run)
  retain-captures --capture-dir D --older-than-days N --action keep|delete|move [--archive-dir A]
                                          retire capture files the ledger holds

Each line printed is meant for the task log; `check` and `expire-state` end with a commit
report, one JSON line (batches, tables, files). Everything that changes the lake waits for its
lock (--wait-lock) and refuses a damaged lake, as `stomp-lake run` does.
"""

from __future__ import annotations

import argparse
import shlex
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from pipeline.commands.options import add_lake
from pipeline.errors import UsageError
from pipeline.lake import Lake
from pipeline.lake.maintenance import compact_lake, vacuum_lake
from pipeline.maintenance import (
    CheckFailed,
    carried_age,
    check_ingested,
    close_carried,
    commit_report,
    existing_lake,
    locked,
    retain_captures,
)
from pipeline.spark.session import DEFAULT_MASTER

DEFAULT_WAIT_LOCK = 600.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_lake(parser)
    parser.add_argument(
        "--wait-lock",
        type=float,
        default=DEFAULT_WAIT_LOCK,
        metavar="SECONDS",
        help="wait this long for a run holding the lake (default %(default)g)",
    )
    jobs = parser.add_subparsers(dest="job", required=True, metavar="JOB")
    job = jobs.add_parser("check", help="fail unless the ledger holds every file")
    job.add_argument(
        "--committed-since",
        type=datetime.fromisoformat,
        metavar="ISO_TIME",
        help="report only the batches that took the files since then (with a time zone)",
    )
    job.add_argument("files", nargs="*", metavar="FILE")
    job = jobs.add_parser("compact", help="merge small files of every table and the ledger")
    job.add_argument("--target-mb", type=int, default=128)
    job = jobs.add_parser("vacuum", help="delete files no table version within the retention uses")
    job.add_argument("--retention-hours", type=int, required=True)
    job = jobs.add_parser("expire-state", help="close connections carried for too long")
    job.add_argument("--older-than-days", type=float, required=True)
    job.add_argument("--batch-id", required=True)
    job.add_argument("--master", default=DEFAULT_MASTER)
    job.add_argument(
        "run_options", nargs="*", metavar="RUN_OPTION", help="after --: more `run` options"
    )
    job = jobs.add_parser("retain-captures", help="delete or move ingested old capture files")
    job.add_argument("--capture-dir", type=Path, required=True)
    job.add_argument("--older-than-days", type=float, required=True)
    job.add_argument("--action", choices=("keep", "delete", "move"), required=True)
    job.add_argument("--archive-dir", type=Path)


def main(args: argparse.Namespace) -> int:
    _check_usage(args)
    lake = existing_lake(args.lake)
    if args.job == "expire-state":  # `stomp-lake run` takes the lock and checks the lake itself
        return _expire_state(args, lake)
    with locked(lake, args.wait_lock):
        if args.job == "check":
            result = check_ingested(lake, args.files, args.committed_since)
            for problem in result.problems:
                print(f"check: {problem}")
            if result.problems:
                raise CheckFailed(f"check: {len(result.problems)} problem(s), listed above")
            window = "" if args.committed_since is None else f" since {args.committed_since}"
            print(
                f"check: {result.ingested} files ingested, {result.duplicates} duplicates of "
                f"ingested files; batches{window}: {', '.join(result.batches) or 'none'}; "
                f"tables: {', '.join(result.lake_tables)}"
            )
            print(commit_report(result.batches, result.tables, result.files))
        elif args.job == "compact":
            for done in compact_lake(lake, args.target_mb):
                print(f"compact {done.table}: {done.files_removed} files -> {done.files_added}")
        elif args.job == "vacuum":
            vacuumed = vacuum_lake(lake, args.retention_hours, time.time())
            for table, removed in vacuumed.files_removed.items():
                print(f"vacuum {table}: {removed} files past {args.retention_hours} h removed")
            pruned = len(vacuumed.state_folders_removed)
            print(f"vacuum carried connection state: {pruned} superseded batch folders removed")
        else:
            _retain_captures(args, lake)
    return 0


def _check_usage(args: argparse.Namespace) -> None:
    if args.job == "retain-captures" and args.action == "move" and args.archive_dir is None:
        raise UsageError("retain-captures: --action move needs --archive-dir")
    if args.job == "check" and args.committed_since and not args.committed_since.tzinfo:
        raise UsageError("check: --committed-since needs a time zone")


def _retain_captures(args: argparse.Namespace, lake: Lake) -> None:
    retention = retain_captures(
        lake, args.capture_dir, args.older_than_days, args.action, args.archive_dir, time.time()
    )
    ingested = len(retention.ingested)
    print(
        f"retain-captures: {retention.old} files older than {args.older_than_days:g} days, "
        f"{ingested} ingested, {retention.old - ingested} not ingested (kept)"
    )
    for path, target in retention.done:
        print(f"deleted {path}" if target is None else f"moved {path} -> {target}")


def _expire_state(args: argparse.Namespace, lake: Lake) -> int:
    state = carried_age(lake)
    if state.age_days is None or state.age_days < args.older_than_days:
        kept = (
            "no carried connection state"
            if state.age_days is None
            else f"carried state {state.age_days:.1f} days old"
        )
        print(f"expire-state: {kept}, keeping (expiry after {args.older_than_days:g} days)")
        print(commit_report([], [], 0))
        return 0
    print(
        f"expire-state: {state.connections} connections carried for {state.age_days:.1f} days: "
        "closing them",
        flush=True,
    )
    options = ["--master", args.master, "--wait-lock", f"{args.wait_lock:g}", *args.run_options]
    tables = close_carried(lake, args.batch_id, _run, options)
    print(commit_report([args.batch_id] if tables else [], tables, 0))
    return 0


def _run(argv: Sequence[str]) -> int:
    """`stomp-lake run`, in this process: its own messages, its exit code."""
    from pipeline.cli import main as stomp_lake

    print("+ stomp-lake " + shlex.join(argv), flush=True)
    return stomp_lake(list(argv))
