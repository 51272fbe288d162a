"""`stomp-lake audit`: run a saved traffic-audit query by name (`--list` shows them)."""

from __future__ import annotations

import argparse
import sys

from pipeline.audit.command_line import (
    add_lake_arguments,
    add_output_arguments,
    check_lake,
    lake_session,
    window_from_args,
)
from pipeline.audit.registry import (
    AuditQuery,
    all_queries,
    get_query,
    parse_assignments,
)
from pipeline.commands.options import verbosity
from pipeline.errors import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="the query's name (--list shows them)")
    parser.add_argument("--list", action="store_true", help="list the saved queries and exit")
    parser.add_argument(
        "--show-sql", action="store_true", help="print the query's SQL instead of running it"
    )
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a parameter of the query (repeatable; --list shows them)",
    )
    # Only `--list` and `--show-sql` may go without a lake.
    add_lake_arguments(parser, lake_required=False)
    add_output_arguments(parser)


def describe(query: AuditQuery) -> str:
    lines = [f"{query.name:<20} {query.description}"]
    lines += [f"{'':<20}   --param {p.name}={p.default}: {p.doc}" for p in query.params]
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    if args.list:
        print("\n".join(describe(query) for query in all_queries()))
        return 0
    if not args.name:
        raise UsageError("name a query, or --list them")
    query = get_query(args.name)
    values = parse_assignments(query, args.param)
    window_from_args(args)
    if args.show_sql:
        print(query.sql)
        return 0
    if args.lake is None:
        raise UsageError("--lake is required to run a query")
    lake = check_lake(args.lake)
    from pipeline.audit.output import error_summary, write_result

    with lake_session(args, lake) as spark:
        try:
            write_result(query.run(spark, values), sys.stdout, args.format, args.limit)
        except Exception as exc:  # noqa: BLE001 - say why, exit 1
            summary = error_summary(exc, verbose=verbosity(args) > 0)
            print(f"stomp-lake audit {query.name}: {summary}", file=sys.stderr)
            return 1
    return 0
