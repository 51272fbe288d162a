"""The totals of fuzz/sessions.tsv per build and target, as the tables of fuzz/README.md.

python -m fuzz.totals              # every build
python -m fuzz.totals plain        # the normal build's sessions only
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

SESSIONS = Path(__file__).with_name("sessions.tsv")
TARGETS = ("decoder", "capture_reader", "reassembly", "flow", "websocket", "tls", "masker")
GOAL = 10_000_000  # executions a target is run to, over its sessions
HEADER = (
    "| target | sessions | seconds | executions | of 10 M | cov / ft at the last session's end "
    "| peak RSS | kept corpus | failures |\n"
    "| --- | ---: | ---: | ---: | ---: | --- | ---: | --- | ---: |"
)


@dataclass(slots=True)
class Total:
    target: str
    sessions: int = 0
    seconds: int = 0
    executions: int = 0
    peak_rss_mb: int = 0
    failures: int = 0
    last: dict[str, str] | None = None

    def add(self, row: dict[str, str]) -> None:
        self.sessions += 1
        self.seconds += int(row["seconds"])
        self.executions += int(row["executions"] or 0)
        self.peak_rss_mb = max(self.peak_rss_mb, int(row["peak_rss_mb"] or 0))
        self.failures += int(row["failures"] or 0)
        self.last = row

    def line(self) -> str:
        last = self.last or {}
        kept_mb = int(last.get("kept_kb") or 0) / 1024
        corpus = f"{last.get('kept_files', '?')} inputs, {kept_mb:.1f} MB"
        share = f"{min(self.executions / GOAL, 1):.0%}"
        return (
            f"| `fuzz_{self.target}` | {self.sessions} | {self.seconds:,} | {self.executions:,} "
            f"| {share} | {last.get('cov', '')} / {last.get('ft', '')} | {self.peak_rss_mb} MB "
            f"| {corpus} | {self.failures} |"
        )


def totals(rows: Iterable[dict[str, str]], build: str) -> list[Total]:
    by_target = {target: Total(target) for target in TARGETS}
    for row in rows:
        if row["build"] == build:
            by_target.setdefault(row["target"], Total(row["target"])).add(row)
    return [total for total in by_target.values() if total.sessions]


def table(rows: Sequence[dict[str, str]], build: str) -> str:
    return "\n".join([HEADER, *(total.line() for total in totals(rows, build))])


def main(argv: Sequence[str]) -> int:
    with open(SESSIONS, newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    builds = argv or sorted({row["build"] for row in rows})
    for build in builds:
        print(f"{build}:\n{table(rows, build)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
