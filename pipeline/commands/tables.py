"""`stomp-lake tables`: the lake's tables with versions and row counts."""

from __future__ import annotations

from pathlib import Path

import schemas
from pipeline.lake import Lake, list_tables

NAME_WIDTH = max(len(name) for name in schemas.TABLES)  # the same columns whatever the lake holds


def print_tables(root: Path) -> int:
    lake = Lake(root)
    infos = list_tables(lake)
    if not infos:
        print(f"no tables in {Path(root).resolve()}")
        return 1
    width = max(NAME_WIDTH, *(len(info.name) for info in infos))
    print(f"{'table':<{width}} {'version':>7} {'rows':>10} {'files':>6} {'bytes':>11}  last commit")
    for info in infos:
        rows = "?" if info.rows is None else str(info.rows)
        when = info.last_commit.isoformat(timespec="seconds") if info.last_commit else "-"
        print(
            f"{info.name:<{width}} {info.version:>7} {rows:>10} {info.files:>6} "
            f"{info.size_bytes:>11}  {when}"
        )
    print(f"lake: {Path(root).resolve()}")
    return 0
