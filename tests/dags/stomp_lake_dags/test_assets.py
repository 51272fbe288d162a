from __future__ import annotations

import pytest
from stomp_lake_dags.assets import CommitReport, asset_name, asset_uri


def test_assets_are_named_per_table() -> None:
    assert asset_name("sessions") == "stomp_lake.sessions"
    assert asset_uri("sessions") == "stomp-lake://tables/sessions"


def test_report_round_trips_through_its_line() -> None:
    report = CommitReport(batches=("b1",), tables=("frames", "sessions"), files=3)
    assert CommitReport.from_line(report.to_line()) == report
    assert report.changed


def test_a_report_without_batches_or_tables_changed_nothing() -> None:
    assert not CommitReport.from_line('{"batches": [], "tables": [], "files": 4}').changed
    assert not CommitReport(batches=("b1",), tables=(), files=0).changed


@pytest.mark.parametrize("line", [None, "", "tables: /lake/tables", '{"batches": []}', "[1]"])
def test_anything_else_is_refused_with_the_line(line: str | None) -> None:
    with pytest.raises(ValueError, match="not a commit report"):
        CommitReport.from_line(line)
