"""`stomp-lake doctor`: check the lake's own state (Delta logs, the ledger, the batch counter,
carried connection state) as every run does before it starts, and say how to repair what is
damaged. Changes nothing; safe while a run is under way."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from pipeline.commands.options import add_lake
from pipeline.errors import UsageError
from pipeline.lake.damage import RECOVERY_DOC, DamagedLake
from pipeline.lake.integrity import check_lake, delta_names
from pipeline.lake.layout import LEDGER, Lake


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_lake(parser)


def main(args: argparse.Namespace) -> int:
    lake = Lake(args.lake)
    if not lake.root.is_dir():
        raise UsageError(f"no lake at {lake.root}")
    started = time.monotonic()
    findings = check_lake(lake)
    took_ms = (time.monotonic() - started) * 1000
    names = delta_names(lake)
    tables = sum(1 for name in names if name != LEDGER)
    checked = f"{tables} table(s){' and the ledger' if LEDGER in names else ''}"
    if not findings:
        print(f"lake {lake.root}: intact ({checked}, batch state; {took_ms:.0f} ms)")
        return 0
    print(
        f"lake {lake.root}: damaged, {len(findings)} finding(s) in {checked} and batch state; "
        f"`stomp-lake run` refuses to start until they are repaired (see {RECOVERY_DOC})"
    )
    for damage in findings:
        print(f"  {_shown(damage.path, lake)}: {damage.problem}")
        print(f"    repair: {damage.repair}")
    return DamagedLake.exit_code


def _shown(path: Path, lake: Lake) -> str:
    try:
        return str(path.relative_to(lake.root))
    except ValueError:
        return str(path)
