"""A `FlowRunner` sink for tests and fuzzing: every row handed over, kept by kind."""

from __future__ import annotations

from collections.abc import Iterator

from pipeline.session.frame_rows import TableRows


class SunkRows:
    """Keeps every row a `pipeline.spark.flows.FlowRunner` hands over, by table (or state
    kind), with their flow keys."""

    def __init__(self) -> None:
        self.rows: dict[str, TableRows] = {}
        self.keys: dict[str, list[str | None]] = {}

    def __call__(self, kind: str, rows: TableRows, keys: list[str | None]) -> None:
        held = self.rows.get(kind)
        if held is None:
            self.rows[kind] = rows  # the runner hands its containers over
        else:
            held.extend(rows)
        self.keys.setdefault(kind, []).extend(keys)

    def items(self) -> Iterator[tuple[str, TableRows, list[str | None]]]:
        for kind, rows in self.rows.items():
            yield kind, rows, self.keys[kind]
