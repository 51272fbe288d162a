"""The report page: escaped text, numbers right-aligned, sections linked from the top."""

from __future__ import annotations

from pipeline.report.html import Section, Table, render_page, render_table


def test_tables_escape_text_and_right_align_numbers() -> None:
    html = render_table(Table(("who", "n", "ms"), [("<admin>", 1234, 0.5), ("x", None, 2.0)]))
    assert "<td>&lt;admin&gt;</td>" in html
    assert '<td class="num">1,234</td>' in html
    assert '<td class="num">0.5</td>' in html and '<td class="num">2</td>' in html
    assert "<td>–</td>" in html
    assert "none" in render_table(Table(("a",), []))


def test_a_page_is_self_contained() -> None:
    section = Section("rates", "Rates & more", "About <it>.", "<svg></svg>", [Table(("a",), [])])
    page = render_page("Report", "meta", [section])
    assert page.startswith("<!DOCTYPE html>")
    assert '<a href="#rates">Rates &amp; more</a>' in page
    assert '<section id="rates">' in page and "About &lt;it&gt;." in page
    for remote in ("http:", "https:", "<script", "<link", "@import", "url("):
        assert remote not in page


def test_ports_and_ids_print_without_separators_quantities_with() -> None:
    html = render_table(
        Table(("client", "port", "session id", "bytes"), [("10.0.0.1", 41790, 123456, 41790)])
    )
    assert '<td class="num">41790</td><td class="num">123456</td>' in html
    assert '<td class="num">41,790</td>' in html


def test_the_page_prints_whole() -> None:
    page = render_page("Report", "meta", [])
    assert "overflow" not in page and "max-height" not in page  # no scroll box to clip rows
    assert "@media print" in page and "break-inside: avoid" in page
    assert "thead { display: table-header-group; }" in page
