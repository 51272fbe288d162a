"""The report of the sample lake: its numbers, that it needs no network, and that headless
Chromium renders every plot with no console error (a screenshot is kept as an artifact)."""

from __future__ import annotations

import re
import shutil
import unicodedata
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pipeline.audit.views import TimeWindow, register_views
from pipeline.report import ReportInfo, build_report
from tests.pipeline.audit.sample_lake import connections, shared_sample_lake
from tests.pipeline.report.headless_chromium import find_browser, headless_chromium
from tests.support.paths import REPO

pytestmark = pytest.mark.spark

SECTIONS = (
    "overview",
    "rates",
    "ack-latency",
    "delivery-latency",
    "connect-latency",
    "receipt-latency",
    "errors",
    "heart-beats",
    "end-reasons",
    "top-talkers",
    "violations",
)
PLOTS = 10  # every section but the overview has one; the rates section one per destination
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
    assert page.count('<svg class="chart"') == _plots(page)


def _plots(page: str) -> int:
    """Charts on the page: one a section, the rates section one per destination shown."""
    return PLOTS - 1 + _section(page, "rates").count('<svg class="chart"')


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


def test_rates_are_small_multiples_with_sent_and_delivered_apart(report) -> None:
    rates = _section(report.read_text(), "rates")
    charts = rates.count('<svg class="chart"')
    destinations = {m["destination"] for c in connections() for m in c["messages_received"]}
    assert charts == min(len(destinations), 6) + (len(destinations) > 6)
    assert 'stroke-dasharray="5 3"' in rates  # delivered dashed, sent solid, two colours
    assert "#0072B2" in rates and "#D55E00" in rates
    assert "sent (SEND)" in rates and "delivered (MESSAGE)" in rates


def test_errors_failed_logins_and_latencies_have_sections_and_tables(report) -> None:
    page = report.read_text()
    conns = list(connections())
    errors = _section(page, "errors")
    refused = [c for c in conns if not c["connected"]]
    assert f"Failed logins ({len(refused)})" in errors
    for conn in refused:  # ports without thousands separators
        assert f'<td class="num">{conn["client_port"]}</td>' in errors
    for anchor, unit in (
        ("connect-latency", "sessions"),
        ("receipt-latency", "receipts"),
        ("delivery-latency", "messages"),
    ):
        section = _section(page, anchor)
        assert f"<th>{unit}</th>" in section and "no data" not in section, anchor
    connected = sum(1 for c in conns if c["connected"])
    connect = _section(page, "connect-latency")
    assert re.search(rf'<tbody><tr><td class="num">{connected}</td>', connect)
    assert "41,790" not in page and "41790" in page


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
    assert len(charts) == _plots(report.read_text())
    for chart in charts:
        assert chart["width"] > 100 and chart["height"] > 50
        assert chart["marks"] > 0
        assert chart["titled"] == chart["marks"]  # every mark has its tooltip
        assert chart["drawn"] == chart["marks"]
    assert shot.stat().st_size > 10_000


def test_printed_to_pdf_in_chromium_every_row_is_there(report, tmp_path) -> None:
    """Print (A4, the page's print stylesheet) and read the PDF back: every table row's cells
    are in its text, so no row was clipped by a scroll box or lost at a page break."""
    pypdf = pytest.importorskip("pypdf")
    found = find_browser()
    if found is None:
        pytest.skip("chromium and chromium-driver are not installed")
    browser_path, driver_path = found
    with headless_chromium(browser_path, driver_path, tmp_path / "chromedriver.log") as browser:
        browser.open(report.as_uri())
        clipped = browser.script(
            "return Array.from(document.querySelectorAll('body *')).filter(e => {"
            "  const o = getComputedStyle(e).overflowY;"
            "  return (o === 'auto' || o === 'scroll' || o === 'hidden')"
            "         && e.scrollHeight > e.clientHeight + 1 && e.tagName !== 'svg';"
            "}).map(e => e.tagName + '.' + e.className)"
        )
        rows = browser.script(
            "return Array.from(document.querySelectorAll('tbody tr')).map(tr =>"
            "  Array.from(tr.cells).map(td => td.textContent.trim()))"
        )
        pdf = browser.print_pdf(tmp_path / "report.pdf")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(pdf, ARTIFACTS / "report.pdf")
    assert clipped == []
    pages = pypdf.PdfReader(pdf).pages
    assert len(pages) > 1
    # NFKC: the PDF's fonts set "fi" and "ffi" as ligatures.
    text = unicodedata.normalize("NFKC", "".join(page.extract_text() for page in pages))
    text = re.sub(r"\s+", "", text)
    missing = [row for row in rows if not all(re.sub(r"\s+", "", cell) in text for cell in row)]
    assert len(rows) > 50 and missing == []
