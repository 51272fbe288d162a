"""`stomp-lake run`: capture files -> the lake's Delta tables, incrementally and idempotently.

Order of a batch, chosen so a run killed anywhere can simply be run again:
begin (pending batch names its files) -> compute -> validate -> commit each table (skipped when
the table already holds the batch) -> write carried connection state -> ledger -> move the state
pointer -> finish (pending mark removed).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from pipeline.lake import Lake, Ledger, begin_batch, carried, finish_batch, lake_lock, pending_batch
from pipeline.lake.failpoints import failpoint
from pipeline.lake.fingerprint import FileFingerprint
from pipeline.lake.orphans import cleanup_lake
from pipeline.lake.staged_tables import commit_tables, discard_tables, stage_tables
from pipeline.session import ModelOptions
from pipeline.session.clock import to_datetime
from pipeline.stomp.commands import ALL_COMMANDS
from pipeline.validation.quarantine import BatchQuarantined, is_quarantined

CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".dmp")
UTC_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"  # to_datetime gives UTC


@dataclass(slots=True)
class RunConfig:
    inputs: list[Path]
    lake: Path
    master: str = "local[*]"
    batch_id: str | None = None
    options: ModelOptions = field(default_factory=ModelOptions)
    broker_ports: tuple[int, ...] = (61613, 61614)
    close_open: bool = False
    wait_lock: float = 0.0
    validate: bool = True


@dataclass(slots=True)
class RunResult:
    batch_id: str | None
    files: int
    counts: dict[str, Any]
    elapsed_s: float
    tables: dict[str, int] = field(default_factory=dict)  # table -> version after the run
    skipped_files: dict[str, list[str]] = field(default_factory=dict)
    # seconds per stage: "spark_start", "compute", "validate", "commit"
    timings: dict[str, float] = field(default_factory=dict)
    validation: Any = None  # the gate's ValidationReport when the batch was validated


def discover(inputs: Iterable[Path]) -> list[str]:
    """Capture files under the inputs; files still being written (temp names) are left alone."""
    found: list[str] = []
    for path in inputs:
        candidates = sorted(path.rglob("*")) if path.is_dir() else [path]
        for candidate in candidates:
            name = candidate.name
            if name.startswith(".") or name.endswith(".partial") or not candidate.is_file():
                continue
            if path.is_dir() and not name.lower().endswith(CAPTURE_SUFFIXES):
                continue
            found.append(str(candidate.resolve()))
    return found


def run(config: RunConfig, progress: Callable[[str], None] = print) -> RunResult:
    started = time.monotonic()
    lake = Lake(config.lake).ensure()
    with lake_lock(lake, wait=config.wait_lock):
        ledger = Ledger(lake)
        pending = pending_batch(lake)
        if pending is not None:
            progress(
                f"resuming batch {pending.batch_id} left unfinished by an earlier run (its own "
                "files only: files added since wait for the next run)"
            )
            batch, skipped = pending, {}
        else:
            scan = ledger.scan(discover(config.inputs))
            skipped = _skipped(scan)
            if not scan.new and config.batch_id and is_quarantined(lake, config.batch_id):
                raise BatchQuarantined(lake, config.batch_id)
            if not scan.new and not config.close_open:
                progress("no new capture files")
                return RunResult(None, 0, {}, time.monotonic() - started, skipped_files=skipped)
            batch = begin_batch(lake, scan.new, batch_id=config.batch_id)
            failpoint("run.batch_begun")
        if carried.current_state_batch(lake) == batch.batch_id:
            progress(f"batch {batch.batch_id} was complete but for its final mark")
            finish_batch(lake, batch.batch_id)
            return RunResult(batch.batch_id, len(batch.files), {}, time.monotonic() - started)
        result = _run_batch(config, lake, ledger, batch.batch_id, batch.files, progress)
        result.skipped_files = skipped
        result.elapsed_s = time.monotonic() - started
        return result


def _skipped(scan: Any) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    if scan.duplicates:
        out["same content as an ingested file"] = [d.file.path for d in scan.duplicates]
    if scan.changed:
        out["changed since it was ingested"] = [f.path for f in scan.changed]
    if scan.problems:
        out["unreadable or still changing"] = [f"{p.path}: {p.detail}" for p in scan.problems]
    return out


def _run_batch(
    config: RunConfig,
    lake: Lake,
    ledger: Ledger,
    batch_id: str,
    files: tuple[FileFingerprint, ...],
    progress: Callable[[str], None],
) -> RunResult:
    from pyspark import StorageLevel

    from pipeline.flows import RunnerConfig
    from pipeline.spark.anomalies import capture_anomalies
    from pipeline.spark.captures import packets_frame
    from pipeline.spark.flows import STATE_KIND, flow_pass, split_tables
    from pipeline.spark.session import build_spark
    from pipeline.spark.summary import capture_stats, table_counts
    from pipeline.validation.preload import preloading_while

    timings: dict[str, float] = {}
    mark = time.monotonic()
    paths = [f.path for f in files]
    progress(f"batch {batch_id}: {len(paths)} capture files")
    cleanup_lake(lake)
    start_spark = partial(build_spark, config.master)
    spark = preloading_while(start_spark) if config.validate else start_spark()
    timings["spark_start"] = _lap(mark)
    mark = time.monotonic()
    progress("stage 1/4: reading packets")
    packets = packets_frame(spark, paths).persist(StorageLevel.MEMORY_AND_DISK)
    runner = RunnerConfig(tuple(paths), config.options, config.broker_ports, config.close_open)
    state = carried.read_carried(spark, lake)
    partitions = max(2, spark.sparkContext.defaultParallelism * 2)
    progress("stage 2/4: reassembling and decoding sessions, staging the tables")
    tagged = flow_pass(packets, state, runner, partitions).persist(StorageLevel.MEMORY_AND_DISK)
    tables = split_tables(tagged, batch_id)
    tables["anomalies"] = tables["anomalies"].unionByName(
        capture_anomalies(packets, paths, batch_id)
    )
    counts = table_counts(tables)
    counts.update(capture_stats(packets))
    staged = stage_tables(spark, lake, batch_id, tables)
    timings["compute"] = _lap(mark)
    report = None
    if config.validate:
        mark = time.monotonic()
        from pipeline.validation.gate import ValidationFailed, validate_batch

        progress("stage 3/4: validating")
        open_sessions = tagged.where(f"kind = '{STATE_KIND}' AND open_session_id IS NOT NULL")
        try:
            report = validate_batch(
                spark,
                lake,
                batch_id,
                staged.frames,
                counts,
                open_sessions=open_sessions.selectExpr("open_session_id AS session_id"),
            )
        except ValidationFailed:
            # Kept aside, not lost: the quarantine holds the tables; the files and the open
            # connections move on so later batches are not held up by this one.
            discard_tables(staged)
            _finish(lake, ledger, batch_id, files, tagged, STATE_KIND)
            raise
        finally:
            timings["validate"] = _lap(mark)
    else:
        progress("stage 3/4: validation skipped (--no-validate)")
    mark = time.monotonic()
    failpoint("run.validated")
    progress("stage 4/4: committing")
    versions = commit_tables(staged)
    _finish(lake, ledger, batch_id, files, tagged, STATE_KIND)
    tagged.unpersist()
    packets.unpersist()
    timings["commit"] = _lap(mark)
    result = RunResult(batch_id, len(paths), counts, 0.0, versions, timings=timings)
    result.validation = report
    return result


def _finish(
    lake: Lake,
    ledger: Ledger,
    batch_id: str,
    files: tuple[FileFingerprint, ...],
    tagged: Any,
    state_kind: str,
) -> None:
    """Carried state, ledger, state pointer, end mark: in this order, so a re-run after a crash
    anywhere starts from the same state."""
    carried.write_carried(tagged.where(f"kind = '{state_kind}'"), lake, batch_id)
    failpoint("run.carried_written")
    ledger.record(files, batch_id)
    failpoint("run.ledger_recorded")
    carried.advance(lake, batch_id)
    failpoint("run.advanced")
    finish_batch(lake, batch_id)


def _lap(mark: float) -> float:
    return round(time.monotonic() - mark, 3)


def config_from_args(args: argparse.Namespace) -> RunConfig:
    body_mode, preview = args.body
    key = args.hash_logins.read_bytes().strip() if args.hash_logins else None
    return RunConfig(
        inputs=list(args.input),
        lake=args.lake,
        master=args.master,
        batch_id=args.batch_id,
        options=ModelOptions(body_mode=body_mode, preview_bytes=preview, login_hash_key=key),
        broker_ports=args.broker_ports,
        close_open=args.open_connections == "close",
        wait_lock=args.wait_lock,
        validate=not args.no_validate,
    )


def format_summary(result: RunResult, lake: Path) -> str:
    c = result.counts
    lines = [f"batch {result.batch_id}: {result.files} files in {result.elapsed_s:.1f} s"]
    if c:
        lines.append(
            f"  packets {c.get('packets', 0)} (tcp {c.get('tcp_packets', 0)}, other "
            f"{c.get('non_tcp_packets', 0)}), sessions {c['sessions']}, frames {c['frames']}, "
            f"messages {c['messages']}, acks {c['acks']}, heart-beats {c['heartbeats']}"
        )
        lines.append(
            f"  violations {c['violations']}, gap bytes {c['gap_bytes']}, "
            f"anomalies {c['anomalies']}, errors {c['errors']}"
        )
        by_command = ", ".join(f"{k} {v}" for k, v in sorted(_known(c["frames_by_command"])))
        lines.append(f"  frames by command: {by_command}")
        if c.get("capture_first_ns") is not None:
            first, last = (to_datetime(c[k]) for k in ("capture_first_ns", "capture_last_ns"))
            lines.append(f"  captured from {first:{UTC_FORMAT}} to {last:{UTC_FORMAT}}")
    if result.timings:
        lines.append("  seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in result.timings.items()))
    for reason, paths in result.skipped_files.items():
        lines.append(f"  skipped ({reason}): {len(paths)} files")
    report = result.validation
    if report is not None:
        lines.append(f"validation: {len(report.outcomes)} expectations passed")
        if report.docs_index is not None:
            lines.append(f"data docs: {report.docs_index}")
    lines.append(f"tables: {Path(lake).resolve() / 'tables'}")
    return "\n".join(lines)


def _known(by_command: dict[str, int]) -> list[tuple[str, int]]:
    """Counts keyed "<direction> <command>"; commands outside STOMP (raw bytes, for non-STOMP
    traffic) are grouped as "<direction> other"."""
    known: dict[str, int] = {}
    for key, count in by_command.items():
        direction, _, command = key.partition(" ")
        name = key if command in ALL_COMMANDS else f"{direction} other"
        known[name] = known.get(name, 0) + count
    return list(known.items())


def run_from_args(args: argparse.Namespace, *, demo: bool = False) -> int:
    from pipeline.lake import LakeBusy

    config = config_from_args(args)

    def progress(message: str) -> None:
        print(f"[stomp-lake] {message}", file=sys.stderr, flush=True)

    from pipeline.validation.gate import ValidationFailed
    from pipeline.validation.quarantine import BatchQuarantined

    try:
        result = run(config, progress)
    except LakeBusy as busy:
        print(f"stomp-lake: {busy}", file=sys.stderr)
        return 3
    except (ValidationFailed, BatchQuarantined) as failed:
        print(f"stomp-lake: validation failed, nothing committed\n{failed}", file=sys.stderr)
        print(f"review: stomp-lake quarantine --lake {config.lake}", file=sys.stderr)
        return 4
    print(format_summary(result, config.lake))
    if demo:
        print(f"query them: .venv/bin/stomp-lake tables --lake {config.lake}")
    return 0
