"""Compare two lakes table by table, row for row: what a change to the pipeline must not move.

    python scripts/compare_lakes.py LAKE_A LAKE_B [--ignore COLUMN ...]

Each table is read whole from its Delta log (delta-rs), ``batch_id`` and the ignored columns
dropped, rows sorted; the tables are equal when the sorted rows are. Prints one line a table and
exits 1 when any differs (2 when a table is missing from one side).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

import schemas
from pipeline.process import run_main


def table_rows(lake: Path, table: str, ignore: set[str]) -> list[tuple] | None:
    root = lake / "tables" / table
    if not (root / "_delta_log").is_dir():
        return None
    data: pa.Table = DeltaTable(str(root)).to_pyarrow_table()
    names = [n for n in data.column_names if n not in ignore]
    columns = [data.column(n).to_pylist() for n in names]
    return sorted(zip(*columns, strict=True), key=repr)


def compare(a: Path, b: Path, ignore: set[str]) -> int:
    status = 0
    for table in schemas.TABLES:
        left, right = table_rows(a, table, ignore), table_rows(b, table, ignore)
        if left is None or right is None:
            sides = [str(p) for p, rows in ((a, left), (b, right)) if rows is None]
            print(f"{table}: missing in {', '.join(sides)}")
            status = max(status, 2)
        elif left == right:
            print(f"{table}: {len(left)} rows, identical")
        else:
            only_a = len(set(map(repr, left)) - set(map(repr, right)))
            only_b = len(set(map(repr, right)) - set(map(repr, left)))
            print(f"{table}: DIFFERENT ({len(left)} vs {len(right)} rows; {only_a} only in A, "
                  f"{only_b} only in B)")  # fmt: skip
            status = max(status, 1)
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lake_a", type=Path)
    parser.add_argument("lake_b", type=Path)
    parser.add_argument("--ignore", action="append", default=["batch_id"])
    args = parser.parse_args(argv)
    return compare(args.lake_a, args.lake_b, set(args.ignore))


if __name__ == "__main__":
    run_main(main)
