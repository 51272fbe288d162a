"""`stomp-lake sql`: Spark SQL over the lake's tables, one query or an interactive prompt."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from pipeline.audit.command_line import (
    add_lake_arguments,
    add_output_arguments,
    check_lake,
    lake_session,
    window_from_args,
)
from pipeline.commands.options import verbosity
from pipeline.errors import UsageError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_lake_arguments(parser)
    add_output_arguments(parser)
    parser.add_argument(
        "query",
        nargs="?",
        help="SQL (several statements: separate them with ';', the last one's rows are "
        "printed); none: an interactive prompt",
    )
    parser.add_argument(
        "--allow-write",
        action="store_true",
        help="run any Spark SQL with your rights (INSERT, CREATE, files by path, ADD JAR, ...); "
        "without it only queries, SHOW/DESCRIBE/EXPLAIN and temporary views run",
    )


def main(args: argparse.Namespace) -> int:
    window_from_args(args)
    lake = check_lake(args.lake)
    from pipeline.audit.statements import all_statements
    from pipeline.audit.views import table_names

    statements = all_statements(args.query) if args.query is not None else None
    if statements == []:
        raise UsageError("the query is empty")
    with lake_session(args, lake, read_only=not args.allow_write) as spark:
        if statements is None:
            return _interactive(spark, table_names(lake), args)
        return _run(spark, statements, args)


def _run(spark: SparkSession, statements: list[str], args: argparse.Namespace) -> int:
    from pipeline.audit.output import error_summary, write_result
    from pipeline.audit.read_only import RefusedStatement, check_read_only

    statement = ""
    try:
        if not args.allow_write:  # every statement, before any runs
            for statement in statements:
                check_read_only(spark, statement)
        frame = None
        for statement in statements:
            frame = spark.sql(statement)
        assert frame is not None
        write_result(frame, sys.stdout, args.format, args.limit)
    except RefusedStatement as exc:
        print(f"stomp-lake sql: refused: {exc}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - a bad query is the user's: say why, exit 1
        summary = error_summary(exc, statement, verbose=verbosity(args) > 0)
        print(f"stomp-lake sql: {summary}", file=sys.stderr)
        return 1
    return 0


def _interactive(spark: SparkSession, tables: list[str], args: argparse.Namespace) -> int:
    """On a terminal, prompt-toolkit edits whole statements and completes names; piped input
    is read line by line."""
    from pipeline.audit.prompt import SqlPrompt, history_path

    prompt = SqlPrompt(
        spark, tables, sys.stdout, fmt=args.format, limit=args.limit, read_only=not args.allow_write
    )
    if sys.stdin.isatty() and sys.stdout.isatty():
        from pipeline.audit.line_editor import terminal_reader

        columns = {name: spark.table(name).columns for name in tables}
        prompt.read = terminal_reader(columns, history_path())
    return prompt.loop()
