"""Lake checks and upkeep for the DAGs, run with the PIPELINE's Python (it imports pipeline.*).

    python maintain.py --lake L check [--committed-since ISO] FILE...
    python maintain.py --lake L compact [--target-mb N]
    python maintain.py --lake L vacuum --retention-hours H
    python maintain.py --lake L expire-state --older-than-days D --stomp-lake BIN
                       --batch-id ID [--master M] [-- RUN_ARG...]
    python maintain.py --lake L retain-captures --capture-dir D --older-than-days N
                       --action keep|delete|move [--archive-dir A]

Exit status: 0 done, 1 a check failed, 2 bad usage, 3 the lake stayed busy (retry later).
Every line printed is meant for the task log; `check` and `expire-state` end with a commit report,
one JSON line (batches, tables, files) that becomes the task's XCom.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path

import pyarrow.parquet as pq

import schemas
from pipeline.lake import LEDGER, Lake, LakeBusy, Ledger, compact, lake_lock, pending_batch, vacuum
from pipeline.lake.batches import batch_sequence
from pipeline.lake.carried import current_state_batch
from pipeline.lake.commit import app_id_for, batch_committed, open_table
from pipeline.lake.layout import private_umask
from pipeline.process import run_main
from pipeline.runner import discover

EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_LAKE_BUSY = 3
SECONDS_PER_DAY = 86_400
SECONDS_PER_HOUR = 3_600


def commit_report(batches: Iterable[str], tables: Iterable[str], files: int) -> str:
    """The last line of `check` and `expire-state` (parsed by stomp_lake_dags.assets)."""
    return json.dumps(
        {"batches": sorted(set(batches)), "tables": sorted(tables), "files": files},
        sort_keys=True,
    )


def committed_tables(lake: Lake, batches: Sequence[str]) -> list[str]:
    """The data tables that hold a commit of any of `batches`."""
    found = []
    for table in schemas.TABLES:
        delta = open_table(lake.table_path(table))
        if delta is None:
            continue
        app_id = app_id_for(table)
        if any(batch_committed(delta, app_id, batch_sequence(lake, b), b) for b in batches):
            found.append(table)
    return found


def check_ingested(lake: Lake, files: Sequence[str], committed_since: datetime | None) -> int:
    """Fail unless the ledger holds every file and the tables exist; then report the batches that
    committed these files since `committed_since` (all of them when None) and their tables."""
    # `stomp-lake run` records resolved paths; resolving here keeps symlinked folders matching.
    paths = [str(Path(f).resolve()) for f in files]
    ledger = Ledger(lake)
    scan = ledger.scan(paths)
    problems = [f"not ingested: {f.path}" for f in scan.new]
    problems += [f"changed since it was ingested (not taken): {f.path}" for f in scan.changed]
    problems += [f"unreadable or still changing: {p.path}: {p.detail}" for p in scan.problems]
    if not lake.table_names():
        problems.append(f"no tables in {lake.tables_dir}")
    for line in problems:
        print(f"check: {line}")
    if problems:
        return EXIT_CHECK_FAILED
    held = set(scan.seen) | {d.ingested_path for d in scan.duplicates}
    since = committed_since
    batches = sorted(
        {
            entry["batch_id"]
            for entry in ledger.entries().to_pylist()
            if entry["path"] in held and (since is None or entry["ingested_at"] >= since)
        }
    )
    tables = committed_tables(lake, batches) if batches else []
    window = "" if since is None else f" since {since.isoformat()}"
    print(
        f"check: {len(scan.seen)} files ingested, {len(scan.duplicates)} duplicates of ingested "
        f"files; batches{window}: {', '.join(batches) or 'none'}; "
        f"tables: {', '.join(lake.table_names())}"
    )
    print(commit_report(batches, tables, len(paths)))
    return 0


def compact_tables(lake: Lake, target_mb: int) -> None:
    for table in [*lake.table_names(), LEDGER]:
        if not (lake.delta_path(table) / "_delta_log").is_dir():
            continue
        metrics = compact(lake, table, target_file_mb=target_mb)
        print(
            f"compact {table}: {metrics.get('numFilesRemoved', 0)} files -> "
            f"{metrics.get('numFilesAdded', 0)}"
        )


def vacuum_tables(lake: Lake, retention_hours: int) -> None:
    for table in [*lake.table_names(), LEDGER]:
        if not (lake.delta_path(table) / "_delta_log").is_dir():
            continue
        removed = vacuum(lake, table, retention_hours=retention_hours)
        print(f"vacuum {table}: {len(removed)} files past {retention_hours} h removed")
    pruned = prune_carried_state(lake, retention_hours, time.time())
    print(f"vacuum carried connection state: {len(pruned)} superseded batch folders removed")


def prune_carried_state(lake: Lake, retention_hours: float, now: float) -> list[str]:
    """Remove the carried-state folders of batches the state pointer has moved past.

    Every batch writes `_state/connections/<batch>/` and the next batch starts from the one
    `current.json` names, so older folders are never read again; the pending batch's own folder
    is kept too. Runs under the lake lock, so no batch is writing one.
    """
    root = lake.state_dir / "connections"
    if not root.is_dir():
        return []
    pending = pending_batch(lake)
    keep = {current_state_batch(lake), pending.batch_id if pending is not None else None}
    cutoff = now - retention_hours * SECONDS_PER_HOUR
    removed = []
    for folder in sorted(root.iterdir()):
        if folder.is_dir() and folder.name not in keep and folder.stat().st_mtime <= cutoff:
            shutil.rmtree(folder)
            removed.append(folder.name)
    return removed


def carried_connections(lake: Lake) -> int:
    """Connections whose state the current pointer carries to the next batch."""
    batch_id = current_state_batch(lake)
    if batch_id is None:
        return 0
    folder = lake.state_dir / "connections" / batch_id
    return sum(pq.read_metadata(part).num_rows for part in folder.glob("*.parquet"))


def carried_state_age_days(lake: Lake, now: float) -> float | None:
    """Days since the carried connection state last moved, or None when nothing is carried."""
    if carried_connections(lake) == 0:
        return None
    pointer = lake.state_dir / "connections" / "current.json"
    return (now - pointer.stat().st_mtime) / SECONDS_PER_DAY


def expire_state(
    lake: Lake,
    older_than_days: float,
    stomp_lake: Path,
    batch_id: str,
    master: str,
    wait_lock: float,
    run_args: Sequence[str],
) -> int:
    """End carried connections when no batch has moved the state for `older_than_days`.

    The carried state only moves when a batch runs, so state this old belongs to connections no
    capture has seen for days: a run over no files closes them ('capture_end'), with the same
    run options as ingestion (`run_args`: body mode, login hashing must not differ).
    """
    age = carried_state_age_days(lake, time.time())
    if age is None or age < older_than_days:
        kept = "no carried connection state" if age is None else f"carried state {age:.1f} days old"
        print(f"expire-state: {kept}, keeping (expiry after {older_than_days:g} days)")
        print(commit_report([], [], 0))
        return 0
    count = carried_connections(lake)
    print(f"expire-state: {count} connections carried for {age:.1f} days: closing them")
    with tempfile.TemporaryDirectory(prefix="stomp-lake-expire-") as empty:
        command = [
            str(stomp_lake), "run", "--input", empty, "--lake", str(lake.root),
            "--open-connections", "close", "--batch-id", batch_id, "--master", master,
            "--wait-lock", f"{wait_lock:g}", *run_args,
        ]  # fmt: skip
        print("+ " + " ".join(command), flush=True)
        returncode = subprocess.run(command, check=False).returncode
    if returncode != 0:
        print(f"expire-state: stomp-lake run exited {returncode}", file=sys.stderr)
        return returncode
    left = carried_connections(lake)
    if left:
        # e.g. the run resumed a batch an ingestion run left pending instead: try again later
        print(f"expire-state: {left} connections still carried after the run", file=sys.stderr)
        return EXIT_CHECK_FAILED
    tables = committed_tables(lake, [batch_id])
    print(commit_report([batch_id] if tables else [], tables, 0))
    return 0


def retain_captures(
    lake: Lake, capture_dir: Path, older_than_days: float, action: str, archive: Path | None
) -> None:
    """Delete or move capture files older than the retention, only once the ledger holds them."""
    cutoff = time.time() - older_than_days * SECONDS_PER_DAY
    old = [Path(p) for p in discover([capture_dir]) if _older_than(Path(p), cutoff)]
    scan = Ledger(lake).scan(old)
    ingested = [Path(p) for p in scan.seen] + [Path(d.file.path) for d in scan.duplicates]
    waiting = len(old) - len(ingested)
    print(
        f"retain-captures: {len(old)} files older than {older_than_days:g} days, "
        f"{len(ingested)} ingested, {waiting} not ingested (kept)"
    )
    if action == "keep":
        return
    for path in ingested:
        if action == "delete":
            path.unlink(missing_ok=True)
            print(f"deleted {path}")
        else:
            assert archive is not None
            target = archive / path.resolve().relative_to(capture_dir.resolve())
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(path, target)
            print(f"moved {path} -> {target}")


def _older_than(path: Path, cutoff: float) -> bool:
    try:
        return path.stat().st_mtime < cutoff
    except OSError:  # gone since the listing
        return False


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="maintain.py", description=__doc__.splitlines()[0])
    parser.add_argument("--lake", required=True, type=Path)
    parser.add_argument("--wait-lock", type=float, default=600.0, metavar="SECONDS")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("check")
    p.add_argument("--committed-since", type=datetime.fromisoformat, metavar="ISO_TIME")
    p.add_argument("files", nargs="*")
    p = sub.add_parser("compact")
    p.add_argument("--target-mb", type=int, default=128)
    p = sub.add_parser("vacuum")
    p.add_argument("--retention-hours", type=int, required=True)
    p = sub.add_parser("expire-state")
    p.add_argument("--older-than-days", type=float, required=True)
    p.add_argument("--stomp-lake", type=Path, required=True)
    p.add_argument("--batch-id", required=True)
    p.add_argument("--master", default="local[*]")
    p.add_argument("run_args", nargs="*", metavar="RUN_ARG", help="after --: more run options")
    p = sub.add_parser("retain-captures")
    p.add_argument("--capture-dir", type=Path, required=True)
    p.add_argument("--older-than-days", type=float, required=True)
    p.add_argument("--action", choices=("keep", "delete", "move"), required=True)
    p.add_argument("--archive-dir", type=Path)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    lake = Lake(args.lake)
    if args.command == "retain-captures" and args.action == "move" and args.archive_dir is None:
        print("retain-captures: --action move needs --archive-dir", file=sys.stderr)
        return EXIT_USAGE
    if args.command == "check" and args.committed_since and not args.committed_since.tzinfo:
        print("check: --committed-since needs a time zone", file=sys.stderr)
        return EXIT_USAGE
    if not lake.root.is_dir():
        print(f"{args.command}: no lake at {lake.root}", file=sys.stderr)
        return EXIT_CHECK_FAILED
    if args.command == "expire-state":  # `stomp-lake run` takes the lake lock itself
        return expire_state(
            lake, args.older_than_days, args.stomp_lake, args.batch_id, args.master,
            args.wait_lock, args.run_args,
        )  # fmt: skip
    try:
        with lake_lock(lake, wait=args.wait_lock):
            return _locked(lake, args)
    except LakeBusy as busy:
        print(f"{args.command}: {busy}", file=sys.stderr)
        return EXIT_LAKE_BUSY


def _locked(lake: Lake, args: argparse.Namespace) -> int:
    with private_umask():
        if args.command == "compact":
            compact_tables(lake, args.target_mb)
        elif args.command == "vacuum":
            vacuum_tables(lake, args.retention_hours)
        elif args.command == "retain-captures":
            retain_captures(
                lake, args.capture_dir, args.older_than_days, args.action, args.archive_dir
            )
        else:
            return check_ingested(lake, args.files, args.committed_since)
    return 0


if __name__ == "__main__":
    run_main(main)
