"""Compare two lakes table by table, row for row: what a change to the pipeline must not move.

    python scripts/compare_lakes.py LAKE_A LAKE_B [--ignore COLUMN ...]

Each table is read whole from its Delta log (delta-rs), ``batch_id`` and the ignored columns
dropped, rows sorted; the tables are equal when the sorted rows are. Columns only one side has
(a newer release's additions) are named and left out. Prints one line a table and exits 1 when
any differs (2 when a table is missing from one side).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

import schemas
from pipeline.process import run_main


def read_table(lake: Path, table: str) -> pa.Table | None:
    root = lake / "tables" / table
    if not (root / "_delta_log").is_dir():
        return None
    return DeltaTable(str(root)).to_pyarrow_table()


def sorted_rows(data: pa.Table, names: list[str]) -> list[tuple]:
    columns = [data.column(n).to_pylist() for n in names]
    return sorted(zip(*columns, strict=True), key=repr)


def compare(a: Path, b: Path, ignore: set[str]) -> int:
    status = 0
    for table in schemas.TABLES:
        left_table, right_table = read_table(a, table), read_table(b, table)
        if left_table is None or right_table is None:
            sides = [str(p) for p, t in ((a, left_table), (b, right_table)) if t is None]
            present = left_table if right_table is None else right_table
            rows = 0 if present is None else present.num_rows
            print(f"{table}: missing in {', '.join(sides)} ({rows} rows on the other side)")
            if rows:
                status = max(status, 2)
            continue
        shared = [n for n in left_table.column_names if n in right_table.column_names]
        names = [n for n in shared if n not in ignore]
        one_side = sorted(set(left_table.column_names) ^ set(right_table.column_names))
        note = f" (not compared, on one side only: {', '.join(one_side)})" if one_side else ""
        left, right = sorted_rows(left_table, names), sorted_rows(right_table, names)
        if left == right:
            print(f"{table}: {len(left)} rows, identical{note}")
        else:
            only_a = len(set(map(repr, left)) - set(map(repr, right)))
            only_b = len(set(map(repr, right)) - set(map(repr, left)))
            print(f"{table}: DIFFERENT ({len(left)} vs {len(right)} rows; {only_a} only in A, "
                  f"{only_b} only in B){note}")  # fmt: skip
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
