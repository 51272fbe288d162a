"""GX validation results reduced to what a person reviewing a failed batch needs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pipeline.validation.suites import ROW_QUERY, stored_type

# The rows of a suite's relation that break an expectation: (expectation type, its kwargs, at
# most how many) -> rows (`pipeline.validation.engine.SuiteEngine.failing_rows`).
Sampler = Callable[[str, dict[str, Any], int], list[Any]]


@dataclass(slots=True)
class ExpectationOutcome:
    suite: str
    expectation: str
    description: str
    success: bool
    unexpected_count: int | None = None
    samples: list[Any] = field(default_factory=list)
    error: str | None = None

    def describe(self) -> str:
        count = "" if self.unexpected_count is None else f" ({self.unexpected_count} unexpected)"
        error = "" if self.error is None else f" [error: {self.error}]"
        return f"{self.suite}: {self.expectation} - {self.description}{count}{error}"


def outcomes_of(
    suite: str, result: Any, samples: int, sampler: Sampler | None = None
) -> list[ExpectationOutcome]:
    """Outcomes of one suite; with ``sampler``, failed expectations get whole sample rows."""
    outcomes = []
    for expectation in result.results:
        outcome = _outcome(suite, expectation, samples)
        if not outcome.success and sampler is not None and outcome.error is None:
            config = expectation.expectation_config
            rows = sampler(outcome.expectation, dict(config.kwargs), samples)
            if rows:
                outcome.samples = [_plain(r) for r in rows]
        outcomes.append(outcome)
    return outcomes


def _outcome(suite: str, result: Any, samples: int) -> ExpectationOutcome:
    config = result.expectation_config
    kind = stored_type(config.type)
    kwargs = dict(config.kwargs)
    description = config.description or _describe(kind, kwargs)
    details = result.result or {}
    error = _raised(result.exception_info or {})
    if kind == ROW_QUERY:
        rows = (details.get("details") or {}).get("unexpected_rows") or []
        count = details.get("observed_value")
        found = [_plain(r) for r in rows[:samples]]
    else:
        count = details.get("unexpected_count")
        found = (
            details.get("partial_unexpected_index_list")
            or details.get("partial_unexpected_list")
            or []
        )
        found = [_plain(r) for r in found[:samples]]
    return ExpectationOutcome(
        suite=suite,
        expectation=kind,
        description=description,
        success=bool(result.success) and error is None,  # an expectation that broke fails
        unexpected_count=count if isinstance(count, int) else None,
        samples=found,
        error=error,
    )


def _raised(info: dict[str, Any]) -> str | None:
    """The error of an expectation that broke, or None: Great Expectations reports it at the
    top of ``exception_info``, or, when a metric raised (a missing column, an SQL error), under
    each such metric's id."""
    if info.get("raised_exception"):
        return str(info.get("exception_message"))
    for metric in info.values():
        if isinstance(metric, dict) and metric.get("raised_exception"):
            return str(metric.get("exception_message"))
    return None


def _describe(kind: str, kwargs: dict[str, Any]) -> str:
    shown = {k: v for k, v in kwargs.items() if k not in ("batch_id", "result_format")}
    return ", ".join(f"{k}={v}" for k, v in shown.items())


def _plain(value: Any) -> Any:
    if hasattr(value, "asDict"):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
