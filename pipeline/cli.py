"""`stomp-lake`: the pipeline's command line."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import NoReturn

from pipeline.commands.options import (
    VALIDATION_ENGINE_VARIABLE,
    add_inputs,
    add_lake,
    add_spark,
    add_tls_keylog,
    add_verbosity,
    env_default,
    version,
)
from pipeline.errors import StompLakeError
from pipeline.net import DEFAULT_BROKER_PORTS
from pipeline.paths import SAMPLES_DIR
from pipeline.validation import VALIDATION_ENGINES

# What an operator (or a scheduler) can tell from the exit code alone.
EXIT_CODES = {
    0: "done (also when there was nothing new)",
    1: "failed: a query, a table or the data was not as expected (the message says which)",
    2: "bad arguments or inputs, found before any work started",
    3: "the lake is busy with another run",
    4: "the batch failed validation and was quarantined: nothing of it was committed",
    5: "the lake's own state is damaged: nothing was changed (stomp-lake doctor: how to repair)",
}
# A next step printed after the error line, by exit code.
EXIT_ADVICE = {4: "review: stomp-lake quarantine --lake {lake}"}


def _body_mode(text: str) -> tuple[str, int]:
    if text in ("hash", "full"):
        return text, 0
    if text.startswith("preview:") and text[8:].isdigit():
        return "preview", int(text[8:])
    raise argparse.ArgumentTypeError("expected hash, full or preview:N")


def _ports(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in text.split(",") if p)
    except ValueError as exc:
        raise argparse.ArgumentTypeError("expected a comma-separated list of ports") from exc


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    add_lake(parser)
    add_spark(parser)
    add_tls_keylog(parser)
    parser.add_argument(
        "--batch-id",
        help="batch id (default: derived from the new files: a re-run of them is the same batch)",
    )
    parser.add_argument(
        "--body",
        type=_body_mode,
        default="hash",
        metavar="hash|preview:N|full",
        help="body kept: sha256 and length only (default), the first N bytes, or all",
    )
    parser.add_argument(
        "--hash-logins",
        metavar="KEY_FILE",
        type=Path,
        help="replace logins with an HMAC-SHA256 keyed by the contents of KEY_FILE",
    )
    parser.add_argument(
        "--broker-ports",
        type=_ports,
        default=",".join(map(str, DEFAULT_BROKER_PORTS)),
        metavar="PORT,PORT",
        help="broker ports, for connections whose handshake was not captured (default %(default)s)",
    )
    parser.add_argument(
        "--open-connections",
        choices=("carry", "close"),
        default="carry",
        help="connections open at the end of the input: carry their state to the next run "
        "(default) or end them as 'capture_end'",
    )
    parser.add_argument(
        "--wait-lock",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait this long for another run on the same lake to finish (default: refuse at once)",
    )
    parser.add_argument(
        "--no-validate", action="store_true", help="skip the Great Expectations gate"
    )
    parser.add_argument(
        "--validation-engine",
        choices=VALIDATION_ENGINES,
        default=env_default(VALIDATION_ENGINE_VARIABLE) or "auto",
        help="where the validation suites run: DuckDB over the batch's files, on this machine, or "
        "Spark; auto: DuckDB with a local master, Spark on a cluster (default: "
        f"${VALIDATION_ENGINE_VARIABLE} or auto)",
    )


# Commands implemented elsewhere: name -> (module, help). Each module has
# `add_arguments(parser)` and `main(args) -> int`, and imports nothing heavy at module level.
PLUGIN_COMMANDS: dict[str, tuple[str, str]] = {
    "quarantine": (
        "pipeline.commands.quarantine",
        "list batches the validation gate kept aside, or release one after review",
    ),
    "sql": ("pipeline.commands.sql", "Spark SQL over the lake's tables (no query: a prompt)"),
    "audit": ("pipeline.commands.audit", "run a saved traffic-audit query by name"),
    "report": ("pipeline.commands.report", "write a self-contained HTML traffic report"),
    "warm": ("pipeline.commands.warm", "make this install's JVM class archive (faster starts)"),
    "doctor": (
        "pipeline.commands.doctor",
        "check the lake's own state (logs, ledger, batch state) and say how to repair it",
    ),
    "maintain": (
        "pipeline.commands.maintain",
        "checks and upkeep of the lake for a scheduler (check, compact, vacuum, ...)",
    ),
}


def _plugin(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(PLUGIN_COMMANDS[name][0])
    except ModuleNotFoundError as exc:
        if exc.name != PLUGIN_COMMANDS[name][0]:
            raise
        return None


def exit_codes_epilog(codes: Sequence[int]) -> str:
    return "exit codes:\n" + "\n".join(f"  {code}  {EXIT_CODES[code]}" for code in codes)


# The exit codes each command can end with (1 also for any failure nobody foresaw).
COMMAND_EXIT_CODES: dict[str, tuple[int, ...]] = {
    "run": (0, 1, 2, 3, 4, 5),
    "demo": (0, 1, 3, 4, 5),
    "tables": (0, 1),
    "quarantine": (0, 1, 2, 3),
    "sql": (0, 1, 2),
    "audit": (0, 1, 2),
    "report": (0, 1, 2),
    "warm": (0,),
    "doctor": (0, 1, 2, 5),
    "maintain": (0, 1, 2, 3, 4, 5),  # 4 and 5 also from expire-state's run
}

RUN_DESCRIPTION = """\
Ingest capture files (pcap or pcapng: the capture proxy's, or tcpdump/dumpcap rotation) into the
lake's Delta tables. Only files the lake's ledger has not seen are read; a connection still open
at the end is carried to the next run. The batch is validated before anything is committed; a
batch that fails is quarantined (see `stomp-lake quarantine`). Files that are not captures are
listed in the summary and left for the next run."""


def _command(
    sub: argparse._SubParsersAction, name: str, help_text: str, description: str | None = None
) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        name,
        help=help_text,
        description=description or help_text,
        epilog=exit_codes_epilog(COMMAND_EXIT_CODES[name]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_verbosity(parser)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stomp-lake",
        description="STOMP traffic capture files -> Delta tables on Spark; SQL, audits and\n"
        "reports over them. `stomp-lake COMMAND --help` for each command.",
        epilog=exit_codes_epilog(sorted(EXIT_CODES)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"stomp-lake {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = _command(sub, "run", "ingest capture files into the lake's Delta tables", RUN_DESCRIPTION)
    add_inputs(run)
    _add_run_options(run)

    demo = _command(sub, "demo", "run the main job over the bundled sample captures")
    demo.add_argument(
        "--lake", type=Path, default=Path("work/lake"), help="lake root (default %(default)s)"
    )
    add_spark(demo)

    tables = _command(sub, "tables", "list the lake's tables with versions and row counts")
    add_lake(tables)

    for name, (_, help_text) in PLUGIN_COMMANDS.items():
        module = _plugin(name)
        if module is not None:
            module.add_arguments(_command(sub, name, help_text, _description(module, help_text)))
    return parser


def _description(module: ModuleType, fallback: str) -> str:
    """A command module's docstring without its first words (the command's name)."""
    doc = (module.__doc__ or "").strip()
    first, _, rest = doc.partition(": ")
    return (rest if first.startswith("`stomp-lake") else doc) or fallback


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _dispatch(args)
    except StompLakeError as error:
        # The one place errors an operator can act on become an exit code and one message.
        print(f"stomp-lake {args.command}: {error}", file=sys.stderr)
        advice = EXIT_ADVICE.get(error.exit_code)
        if advice:
            print(advice.format(lake=getattr(args, "lake", None)), file=sys.stderr)
        return error.exit_code


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "tables":
        from pipeline.commands.tables import print_tables

        return print_tables(args.lake)
    if args.command in PLUGIN_COMMANDS:
        module = _plugin(args.command)
        assert module is not None
        return int(module.main(args))
    from pipeline.commands.run import run_from_args

    if args.command == "demo":
        argv2 = [
            "run",
            "--input",
            str(SAMPLES_DIR),
            "--lake",
            str(args.lake),
            "--master",
            args.master,
            "--driver-memory",
            args.driver_memory,
            *[f"--conf={key}={value}" for key, value in args.conf],
            "--open-connections",
            "close",
            *(["-q"] if args.quiet else ["-v"] * args.verbose),
        ]
        return run_from_args(build_parser().parse_args(argv2), demo=True)
    return run_from_args(args)


def run_cli() -> NoReturn:
    """The `stomp-lake` program: ``main()``, then `pipeline.process.exit_cleanly`: Arrow's thread
    pools drained (they could abort a finished run at interpreter teardown, exit -6), output
    flushed, and an exit that skips the teardown; Spark's JVM exits by itself when its stdin
    closes."""
    from pipeline.process import run_main

    run_main(main)


if __name__ == "__main__":
    run_cli()
