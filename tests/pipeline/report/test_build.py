"""The report of the sample lake: its numbers, that it needs no network, and that headless
Chromium renders every plot with no console error (a screenshot is kept as an artifact)."""

from __future__ import annotations

import re
import shutil
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pipeline.audit.views import TimeWindow, register_views
from pipeline.report import ReportInfo, build_report
from tests.conftest import REPO
from tests.pipeline.audit.sample_lake import connections, shared_sample_lake
from tests.pipeline.report.headless_chromium import find_browser, headless_chromium

pytestmark = pytest.mark.spark

SECTIONS = (
    "overview",
    "rates",
    "ack-latency",
    "heart-beats",
    "end-reasons",
    "top-talkers",
    "violations",
)
PLOTS = 6  # every section but the overview
ARTIFACTS = REPO / "work" / "artifacts"  # gitignored


@pytest.fixture(scope="module")
def report(spark, tmp_path_factory) -> Path:
    session = spark.newSession()
    lake = shared_sample_lake(tmp_path_factory)
    register_views(session, lake)
    info = ReportInfo("Sample traffic", str(lake.root), TimeWindow(), datetime.now(UTC))
    path = tmp_path_factory.mktemp("report") / "report.html"
    path.write_text(build_report(session, info), encoding="utf-8")
    return path


def _section(page: str, anchor: str) -> str:
    start = page.index(f'<section id="{anchor}">')
    return page[start : page.index("</section>", start)]


def test_the_page_needs_nothing_from_the_network(report) -> None:
    page = report.read_text()
    for remote in ("http:", "https:", "<script", "<link", "@import", "url(", "<iframe", "<img"):
        assert remote not in page
    assert all(f'<section id="{anchor}">' in page for anchor in SECTIONS)
    assert page.count('<svg class="chart"') == PLOTS


def test_the_numbers_are_those_of_the_samples(report) -> None:
    page = report.read_text()
    conns = list(connections())
    overview = _section(page, "overview")
    assert f'<td>sessions</td><td class="num">{len(conns)}</td>' in overview
    delivered = sum(len(c["messages_received"]) for c in conns)
    assert f'<td>messages delivered</td><td class="num">{delivered}</td>' in overview
    endings = Counter(c["ending"] for c in conns)
    reasons = _section(page, "end-reasons")
    assert f"error: {endings['server-close']} sessions" in reasons  # a tooltip
    assert f'<td>capture_end</td><td class="num">{endings["open"]}</td>' in reasons
    rates = _section(page, "rates")
    for destination, count in Counter(
        m["destination"] for c in conns for m in c["messages_received"]
    ).most_common(3):
        assert re.search(
            rf"<td>{re.escape(destination)}</td><td class=\"num\">\d+</td>"
            rf"<td class=\"num\">{count}</td>",
            rates,
        )
    assert "missing_header" in _section(page, "violations")


def test_an_empty_window_still_makes_a_report(spark, tmp_path_factory) -> None:
    session = spark.newSession()
    lake = shared_sample_lake(tmp_path_factory)
    window = TimeWindow(datetime(2000, 1, 1, tzinfo=UTC), datetime(2000, 1, 2, tzinfo=UTC))
    register_views(session, lake, window)
    page = build_report(session, ReportInfo("Empty", "lake", window, datetime.now(UTC)))
    assert page.count("no data in this window") == PLOTS
    assert "traffic from 2000-01-01 00:00:00 UTC to 2000-01-02 00:00:00 UTC" in page


def test_headless_chromium_renders_every_plot_without_console_errors(report, tmp_path) -> None:
    found = find_browser()
    if found is None:
        pytest.skip(
            "chromium and chromium-driver are not installed (scripts/install-system-deps.sh)"
        )
    browser_path, driver_path = found
    with headless_chromium(browser_path, driver_path, tmp_path / "chromedriver.log") as browser:
        browser.open(report.as_uri())
        charts = browser.script(
            "return Array.from(document.querySelectorAll('svg.chart')).map(svg => {"
            "  const box = svg.getBoundingClientRect();"
            "  const marks = Array.from(svg.querySelectorAll('.mark'));"
            "  return {width: box.width, height: box.height, marks: marks.length,"
            "          titled: marks.filter(m => m.querySelector('title')).length,"
            "          drawn: marks.filter(m => m.getBBox().width > 0).length};"
            "})"
        )
        errors = [m for m in browser.console() if m["level"] in ("SEVERE", "ERROR")]
        height = browser.script("return document.documentElement.scrollHeight")
        browser.resize(1400, min(int(height), 16000))
        shot = browser.screenshot(tmp_path / "report.png")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, ARTIFACTS / "report-screenshot.png")
    assert errors == []
    assert len(charts) == PLOTS
    for chart in charts:
        assert chart["width"] > 100 and chart["height"] > 50
        assert chart["marks"] > 0
        assert chart["titled"] == chart["marks"]  # every mark has its tooltip
        assert chart["drawn"] == chart["marks"]
    assert shot.stat().st_size > 10_000
