"""What `stomp-lake sql`, `audit` and `report` share: lake and window options, the session."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.audit.output import FORMATS
from pipeline.audit.views import TimeWindow, parse_time, register_views
from pipeline.commands.options import add_lake, add_spark, spark_settings
from pipeline.errors import StompLakeError, UsageError
from pipeline.lake import Lake

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _time(text: str) -> object:
    try:
        return parse_time(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _limit(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError("expected a row count (0: all rows)")
    return int(text)


def add_lake_arguments(parser: argparse.ArgumentParser, *, lake_required: bool = True) -> None:
    add_lake(parser, required=lake_required)
    add_spark(parser)
    parser.add_argument(
        "--since", type=_time, metavar="TIME", help="only traffic at or after TIME (ISO, UTC)"
    )
    parser.add_argument(
        "--until", type=_time, metavar="TIME", help="only traffic before TIME (ISO, UTC)"
    )


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format", choices=FORMATS, default="table", help="output format (default %(default)s)"
    )
    parser.add_argument(
        "--limit",
        type=_limit,
        metavar="N",
        help="at most N rows (default: 1000 in a table, all in CSV/JSON; 0: all)",
    )


class NoLake(StompLakeError):
    """The lake to read does not exist."""

    exit_code = 1


def window_from_args(args: argparse.Namespace) -> TimeWindow:
    try:
        return TimeWindow(getattr(args, "since", None), getattr(args, "until", None))
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def check_lake(root: Path) -> Lake:
    """The lake, noting when it holds no tables yet; NoLake when there is none."""
    lake = Lake(root)
    if not lake.root.is_dir():
        raise NoLake(f"no lake at {lake.root}")
    if not lake.table_names():
        print(
            f"stomp-lake: note: {lake.root} holds no tables yet; they read as empty",
            file=sys.stderr,
        )
    return lake


# Spark's `format.`path`` queries; off in a read-only session, a second wall behind
# `read_only.check_read_only` (which also refuses SET of it).
RUN_SQL_ON_FILES = "spark.sql.runSQLOnFiles"


@contextmanager
def lake_session(
    args: argparse.Namespace, lake: Lake, *, read_only: bool = True
) -> Iterator[SparkSession]:
    """A SparkSession with every table of the lake registered as a view. A session this process
    already had (a notebook, the tests) is reused, left running and given back its setting of
    `spark.sql.runSQLOnFiles`; a new one is stopped."""
    from pyspark.sql import SparkSession

    existing = SparkSession.getActiveSession()
    spark = spark_settings(args).start(app_name=f"stomp-lake {args.command}")
    on_files = spark.conf.get(RUN_SQL_ON_FILES) or "true"
    try:
        if read_only:
            spark.conf.set(RUN_SQL_ON_FILES, "false")
        register_views(spark, lake, window_from_args(args))
        yield spark
    finally:
        if existing is None:
            spark.stop()
        else:
            spark.conf.set(RUN_SQL_ON_FILES, on_files)
