"""The self-contained HTML traffic report: Spark aggregates (`data`), inline SVG charts (`svg`),
the page (`html`), and the whole of it (`build`)."""

from __future__ import annotations

from pipeline.report.build import ReportInfo, build_report

__all__ = ["ReportInfo", "build_report"]
