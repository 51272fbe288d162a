"""`stomp-lake report`: one self-contained HTML file with the traffic's plots and numbers."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

from pipeline.audit.command_line import (
    add_lake_arguments,
    check_lake,
    lake_session,
    window_from_args,
)

DEFAULT_TITLE = "STOMP traffic report"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_lake_arguments(parser)
    parser.add_argument("--out", required=True, type=Path, help="the HTML file to write")
    parser.add_argument("--title", default=DEFAULT_TITLE, help="page title (default %(default)s)")


def main(args: argparse.Namespace) -> int:
    window = window_from_args(args)
    lake = check_lake(args.lake)
    from pipeline.report import ReportInfo, build_report

    info = ReportInfo(args.title, str(lake.root), window, datetime.now(UTC))
    with lake_session(args, lake) as spark:
        page = build_report(spark, info)
    out: Path = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    # Written whole then renamed: a reader never sees half a report.
    partial = out.with_name(f".{out.name}.partial")
    partial.write_text(page, encoding="utf-8")
    partial.replace(out)
    print(f"report: {out.resolve()} ({len(page.encode()):,} bytes)")
    return 0
