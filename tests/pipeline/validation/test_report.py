"""pipeline/validation/report.py: the report a validated batch leaves (its JSON and its text)
and the error a failing batch raises."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pipeline.errors import StompLakeError
from pipeline.validation.report import ValidationFailed, ValidationReport
from pipeline.validation.results import ExpectationOutcome

RESULT_PATH = Path("/lake/_runs/b1/validation.json")


def _passed(suite: str = "frames") -> ExpectationOutcome:
    return ExpectationOutcome(
        suite=suite,
        expectation="expect_column_values_to_not_be_null",
        description="column=session_id",
        success=True,
        unexpected_count=0,
    )


def _negative_latency() -> ExpectationOutcome:
    return ExpectationOutcome(
        suite="acks",
        expectation="expect_column_values_to_be_between",
        description="column=latency_ms, min_value=0",
        success=False,
        unexpected_count=2,
        samples=[
            {"session_id": "s-1", "latency_ms": -5.0, "ts": datetime(2025, 1, 2, tzinfo=UTC)},
            {"session_id": "s-2", "latency_ms": -7.0, "ts": None},
        ],
    )


def _broken_query() -> ExpectationOutcome:
    return ExpectationOutcome(
        suite="session_consistency",
        expectation="unexpected_rows_expectation",
        description="session_id is in sessions",
        success=False,
        error="Binder Error: no such column",
    )


def _report(
    outcomes: list[ExpectationOutcome],
    *,
    docs_index: Path | None = None,
    quarantine_path: Path | None = None,
    timings_s: dict[str, float] | None = None,
) -> ValidationReport:
    return ValidationReport(
        batch_id="b1",
        success=all(o.success for o in outcomes),
        outcomes=outcomes,
        elapsed_s=1.23456,
        docs_index=docs_index,
        result_path=RESULT_PATH,
        quarantine_path=quarantine_path,
        timings_s=timings_s or {},
    )


def test_failures_are_the_failed_outcomes_in_their_order() -> None:
    first, second = _negative_latency(), _broken_query()
    report = _report([_passed(), first, _passed("acks"), second])
    assert report.failures == [first, second]
    assert _report([_passed()]).failures == []


def test_json_counts_every_outcome_and_keeps_failures_whole() -> None:
    failure = _negative_latency()
    failure.samples = [{"session_id": "s-1", "latency_ms": -5.0}]
    report = _report(
        [_passed(), failure],
        docs_index=Path("/lake/docs/b1/index.html"),
        quarantine_path=Path("/lake/_quarantine/b1"),
        timings_s={"gx_setup": 0.12345, "suites": 2.0},
    )
    saved = report.to_json()
    assert saved == {
        "batch_id": "b1",
        "success": False,
        "elapsed_s": 1.235,
        "timings_s": {"gx_setup": 0.123, "suites": 2.0},
        "evaluated": 2,
        "failed": 1,
        "docs_index": "/lake/docs/b1/index.html",
        "quarantine_path": "/lake/_quarantine/b1",
        "failures": [
            {
                "suite": "acks",
                "expectation": "expect_column_values_to_be_between",
                "description": "column=latency_ms, min_value=0",
                "success": False,
                "unexpected_count": 2,
                "samples": [{"session_id": "s-1", "latency_ms": -5.0}],
                "error": None,
            }
        ],
        "outcomes": [
            {
                "suite": "frames",
                "expectation": "expect_column_values_to_not_be_null",
                "success": True,
            },
            {
                "suite": "acks",
                "expectation": "expect_column_values_to_be_between",
                "success": False,
            },
        ],
    }
    assert json.loads(json.dumps(saved)) == saved  # what validation.json holds


def test_json_of_a_report_without_docs_or_quarantine_names_neither() -> None:
    saved = _report([_passed()]).to_json()
    assert saved["docs_index"] is None and saved["quarantine_path"] is None
    assert saved["timings_s"] == {} and saved["failures"] == []
    assert saved["success"] is True and saved["failed"] == 0


def test_text_lists_each_failure_with_its_sample_rows_then_where_to_look() -> None:
    report = _report(
        [_passed(), _negative_latency(), _broken_query()],
        docs_index=Path("/lake/docs/b1/index.html"),
        quarantine_path=Path("/lake/_quarantine/b1"),
    )
    assert report.describe().splitlines() == [
        "batch b1: 2 of 3 expectations failed",
        "  - acks: expect_column_values_to_be_between - column=latency_ms, min_value=0 "
        "(2 unexpected)",
        '      {"session_id": "s-1", "latency_ms": -5.0, "ts": "2025-01-02 00:00:00+00:00"}',
        '      {"session_id": "s-2", "latency_ms": -7.0, "ts": null}',
        "  - session_consistency: unexpected_rows_expectation - session_id is in sessions "
        "[error: Binder Error: no such column]",
        "quarantined batch: /lake/_quarantine/b1",
        "data docs: /lake/docs/b1/index.html",
        f"validation result: {RESULT_PATH}",
    ]


def test_text_of_a_passing_batch_names_only_its_result() -> None:
    assert _report([_passed(), _passed("acks")]).describe().splitlines() == [
        "batch b1: 0 of 2 expectations failed",
        f"validation result: {RESULT_PATH}",
    ]


def test_a_failing_batch_raises_its_report_as_an_operator_error() -> None:
    report = _report([_negative_latency()], quarantine_path=Path("/lake/_quarantine/b1"))
    with pytest.raises(ValidationFailed) as caught:
        raise ValidationFailed(report)
    assert caught.value.report is report
    assert str(caught.value) == report.describe()
    assert isinstance(caught.value, StompLakeError) and caught.value.exit_code == 4
