"""`stomp-lake run`: parse the arguments, call the runner (pipeline.runner), print the summary."""

from __future__ import annotations

import argparse
from pathlib import Path

from pipeline.commands.options import spark_settings
from pipeline.commands.progress import RunProgress
from pipeline.errors import StompLakeError
from pipeline.lake.full_disk import disk_full
from pipeline.lake.layout import Lake
from pipeline.runner import RunConfig, RunResult, run
from pipeline.session import ModelOptions
from pipeline.session.clock import to_datetime
from pipeline.spark.session import scratch_dir
from pipeline.stomp.commands import ALL_COMMANDS
from pipeline.validation.docs_index import batch_page_path

# Re-exported for callers written before the runner had a module of its own.
__all__ = ["RunConfig", "RunResult", "config_from_args", "format_summary", "run"]

UTC_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"  # to_datetime gives UTC
LISTED_SKIPPED = 20  # skipped files named in the summary, per reason


def config_from_args(args: argparse.Namespace) -> RunConfig:
    body_mode, preview = args.body
    key = args.hash_logins.read_bytes().strip() if args.hash_logins else None
    return RunConfig(
        inputs=list(args.input),
        lake=args.lake,
        batch_id=args.batch_id,
        options=ModelOptions(body_mode=body_mode, preview_bytes=preview, login_hash_key=key),
        broker_ports=args.broker_ports,
        close_open=args.open_connections == "close",
        wait_lock=args.wait_lock,
        validate=not args.no_validate,
        validation_engine=args.validation_engine,
        spark=spark_settings(args),
        tls_keylogs=tuple(args.tls_keylog),
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
        lines += [f"    {path}" for path in paths[:LISTED_SKIPPED]]
        if len(paths) > LISTED_SKIPPED:
            lines.append(f"    ... and {len(paths) - LISTED_SKIPPED} more")
    report = result.validation
    if report is not None:
        docs = Lake(lake).docs_dir
        lines.append(
            f"validation: {len(report.outcomes)} expectations passed: "
            f"{batch_page_path(Lake(lake), report.batch_id)}"
        )
        lines.append(f"validation runs: {docs / 'index.html'}")
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
    """Errors of the StompLakeError family propagate: the CLI maps them to exit codes. A full
    disk, in whatever form it surfaced, becomes one of them (DiskFull)."""
    config = config_from_args(args)
    try:
        with RunProgress(config.spark.verbosity) as progress:
            result = run(config, progress)
    except StompLakeError:
        raise
    except Exception as error:
        full = disk_full(error, config.lake, scratch_dir())
        if full is None:
            raise
        raise full from None
    print(format_summary(result, config.lake))
    if demo:
        print(f"query them: .venv/bin/stomp-lake tables --lake {config.lake}")
    return 0
