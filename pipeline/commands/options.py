"""Options every `stomp-lake` command shares, and where their defaults come from.

Each setting has one spelling on the command line and, where a scheduler needs it, one in the
environment (the same names the Airflow DAGs use); the command line wins. The table in
README.md ("Settings") lists them all; `SETTINGS` below holds its rows of the settings defined
here, in its order, and a test checks the two agree.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from pipeline.spark.session import (
    DEFAULT_DRIVER_MEMORY,
    DEFAULT_MASTER,
    WORK_VARIABLE,
    SparkSettings,
)

LAKE_VARIABLE = "STOMP_LAKE_LAKE"
INPUT_VARIABLE = "STOMP_LAKE_INPUT"  # several paths: separated by ':' (os.pathsep)
TLS_KEYLOG_VARIABLE = "STOMP_LAKE_TLS_KEYLOG"  # the same
MASTER_VARIABLE = "STOMP_LAKE_MASTER"
DRIVER_MEMORY_VARIABLE = "STOMP_LAKE_DRIVER_MEMORY"
VALIDATION_ENGINE_VARIABLE = "STOMP_LAKE_VALIDATION_ENGINE"

# (option, environment variable or "", what it sets): the README's settings table's rows of
# these settings, in its order.
SETTINGS: tuple[tuple[str, str, str], ...] = (
    ("--lake", LAKE_VARIABLE, "lake root directory"),
    ("--input", INPUT_VARIABLE, "capture files or folders for `run`"),
    ("--tls-keylog", TLS_KEYLOG_VARIABLE, "NSS key log files or folders, for TLS connections"),
    ("--master", MASTER_VARIABLE, "Spark master URL"),
    ("--driver-memory", DRIVER_MEMORY_VARIABLE, "memory of Spark's driver JVM"),
    ("--conf KEY=VALUE", "", "any Spark setting, repeatable"),
    ("", WORK_VARIABLE, "Spark's scratch space (default: $TMPDIR/stomp-lake-<uid>)"),
    ("-q / -v / -vv", "", "quiet / Spark warnings / everything"),
    ("--validation-engine", VALIDATION_ENGINE_VARIABLE, "where the validation suites run"),
)


def version() -> str:
    try:
        return metadata.version("stomp-lake")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def env_default(variable: str) -> str | None:
    value = os.environ.get(variable, "").strip()
    return value or None


def add_verbosity(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "-q", "--quiet", action="store_true", help="print only the result and errors"
    )
    group.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="Spark's warnings and whole error messages (-vv: Spark's info log too)",
    )


def verbosity(args: argparse.Namespace) -> int:
    """-1 quiet, 0 default, 1 and 2 verbose."""
    return -1 if getattr(args, "quiet", False) else int(getattr(args, "verbose", 0) or 0)


def add_lake(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    default = env_default(LAKE_VARIABLE)
    parser.add_argument(
        "--lake",
        type=Path,
        default=Path(default) if default else None,
        required=required and default is None,
        help=f"lake root directory (default: ${LAKE_VARIABLE})",
    )


def add_inputs(parser: argparse.ArgumentParser) -> None:
    default = env_default(INPUT_VARIABLE)
    parser.add_argument(
        "--input",
        nargs="+",
        type=Path,
        default=[Path(p) for p in default.split(os.pathsep) if p] if default else None,
        required=default is None,
        metavar="PATH",
        help="capture files or folders (searched recursively for .pcap/.pcapng/.cap/.dmp) "
        f"(default: ${INPUT_VARIABLE}, paths separated by '{os.pathsep}')",
    )


class _AppendOverDefault(argparse._AppendAction):
    """Repeatable, and the paths given replace the default (the environment's) instead of
    adding to it: the command line wins."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        if getattr(namespace, self.dest, None) is self.default:
            setattr(namespace, self.dest, [])
        super().__call__(parser, namespace, values, option_string)


def add_tls_keylog(parser: argparse.ArgumentParser) -> None:
    default = env_default(TLS_KEYLOG_VARIABLE)
    parser.add_argument(
        "--tls-keylog",
        action=_AppendOverDefault,
        type=Path,
        default=[Path(p) for p in default.split(os.pathsep) if p] if default else [],
        metavar="PATH",
        help="NSS key log file (SSLKEYLOGFILE) or folder of them, to decrypt TLS connections; "
        "repeatable; secrets that pcapng captures embed are used without it "
        f"(default: ${TLS_KEYLOG_VARIABLE}, paths separated by '{os.pathsep}')",
    )


def _assignment(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def add_spark(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--master",
        default=env_default(MASTER_VARIABLE) or DEFAULT_MASTER,
        help=f"Spark master URL (default: ${MASTER_VARIABLE} or %(default)s)",
    )
    parser.add_argument(
        "--driver-memory",
        default=env_default(DRIVER_MEMORY_VARIABLE) or DEFAULT_DRIVER_MEMORY,
        metavar="SIZE",
        help=f"memory of Spark's driver JVM, e.g. 4g (default: ${DRIVER_MEMORY_VARIABLE} or "
        "%(default)s)",
    )
    parser.add_argument(
        "--conf",
        action="append",
        type=_assignment,
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting, as spark-submit takes it (repeatable; wins over ours)",
    )


def spark_settings(args: argparse.Namespace) -> SparkSettings:
    return SparkSettings(
        master=getattr(args, "master", DEFAULT_MASTER),
        driver_memory=getattr(args, "driver_memory", DEFAULT_DRIVER_MEMORY),
        conf=dict(getattr(args, "conf", None) or []),
        verbosity=verbosity(args),
    )
