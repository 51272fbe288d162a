"""The Airflow Assets of the lake's tables, and what a task's commit report says to publish.

The table names are not listed here: the pipeline defines them once (`schemas/`). The DAGs
declare one AssetAlias as outlet at parse time, and the task that publishes adds an event for
each table the run's batches committed, as named by the pipeline's own report (the last line
`stomp-lake maintain check` or `expire-state` prints, which the task's XCom holds). Downstream DAGs
schedule on `Asset(name="stomp_lake.<table>", uri="stomp-lake://tables/<table>")`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

TABLES_ALIAS = "stomp_lake.tables"


def asset_name(table: str) -> str:
    """The Airflow Asset name a downstream DAG schedules on, e.g. `stomp_lake.sessions`."""
    return f"stomp_lake.{table}"


def asset_uri(table: str) -> str:
    return f"stomp-lake://tables/{table}"


@dataclass(frozen=True, slots=True)
class CommitReport:
    """What a task committed to the lake: batch ids and the tables they reached."""

    batches: tuple[str, ...]
    tables: tuple[str, ...]
    files: int

    @classmethod
    def from_line(cls, line: str | None) -> CommitReport:
        """Parse the report line; ValueError with the line when it is not one."""
        try:
            data = json.loads(line or "")
            return cls(
                batches=tuple(str(b) for b in data["batches"]),
                tables=tuple(str(t) for t in data["tables"]),
                files=int(data.get("files", 0)),
            )
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"not a commit report: {line!r} ({error})") from None

    def to_line(self) -> str:
        data = {"batches": list(self.batches), "tables": list(self.tables), "files": self.files}
        return json.dumps(data, sort_keys=True)

    @property
    def changed(self) -> bool:
        return bool(self.batches and self.tables)


def publish_tables(
    report: CommitReport, outlet_events: Any, alias: Any, extra: dict[str, Any], nothing: str
) -> list[str]:
    """Inside a task whose outlet is `alias`: one Asset event per table the report names; a
    skipped task (no event at all) when nothing was committed, saying why (`nothing`)."""
    from airflow.sdk import Asset
    from airflow.sdk.exceptions import AirflowSkipException

    if not report.changed:
        raise AirflowSkipException(f"no Asset events: {nothing}")
    for table in report.tables:
        asset = Asset(name=asset_name(table), uri=asset_uri(table))
        outlet_events[alias].add(asset, extra={**extra, "batches": list(report.batches)})
    print(f"Asset events for {', '.join(report.tables)} (batches {', '.join(report.batches)})")
    return list(report.tables)
