"""`stomp-lake warm`: make this install's JVM class archive (once; every local run then starts
faster). An optimisation only: when it cannot be made, Spark starts without it."""

from __future__ import annotations

import argparse
import subprocess
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--force", action="store_true", help="make it again even if it exists")


def main(args: argparse.Namespace) -> int:
    from pipeline.warm import warm

    try:
        path = warm(force=args.force)
    except (OSError, RuntimeError, subprocess.CalledProcessError) as error:
        print(f"class archive: not made ({error}); Spark starts without it", file=sys.stderr)
        return 0
    print(f"class archive: {path}" if path is not None else "class archive: no JDK or PySpark")
    return 0
