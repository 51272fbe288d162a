"""The inline SVG charts: round ticks, a tooltip per mark, escaped text, an empty state."""

from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import pytest

from pipeline.report.svg import (
    Bar,
    Group,
    Series,
    bar_chart,
    empty_chart,
    grouped_histogram,
    number,
    ticks,
    time_lines,
    time_ticks,
)


def _title(mark: ET.Element) -> str | None:
    title = mark.find("title")
    assert title is not None
    return title.text


def _marks(svg: str) -> list[ET.Element]:
    root = ET.fromstring(svg)  # well-formed XML, so well-formed inline SVG
    return [e for e in root.iter() if e.get("class") == "mark"]


def test_ticks_are_round_and_cover_the_maximum() -> None:
    assert ticks(50) == [0, 20, 40, 60]
    assert ticks(100) == [0, 25, 50, 75, 100]
    assert ticks(11, integer=True) == [0, 5, 10, 15]
    assert ticks(2, integer=True) == [0, 1, 2]
    assert ticks(0.3) == pytest.approx([0, 0.1, 0.2, 0.3])
    assert ticks(0) == [0, 1]
    assert number(1234) == "1,234" and number(0.125) == "0.125" and number(1234.5) == "1,234"


def test_bars_carry_their_numbers_and_escape_labels() -> None:
    svg = bar_chart("Sessions", [Bar("<rst>", 3, "rst: 3 sessions"), Bar("fin & co", 11, "fin")])
    marks = _marks(svg)
    assert [_title(m) for m in marks] == ["rst: 3 sessions", "fin"]
    assert "&lt;rst&gt;" in svg and "fin &amp; co" in svg
    assert "<script" not in svg and "http" not in svg


def test_grouped_histogram_has_a_bar_per_series_and_a_legend() -> None:
    groups = [Group("0–1x", (1, 2), ("a", "b")), Group("1–2x", (0, 5), ("c", "d"))]
    svg = grouped_histogram("Beats", groups, ["client", "server"], x_title="x", y_title="y")
    assert len(_marks(svg)) == 4
    assert ">client<" in svg and ">server<" in svg


def test_time_lines_put_a_marker_with_its_tooltip_on_every_point() -> None:
    start = datetime(2026, 11, 22, 2, 36, tzinfo=UTC)
    points = tuple((start + timedelta(seconds=i), float(i)) for i in range(3))
    series = [
        Series("/queue/a sent", points, ("p0", "p1", "p2")),
        Series("/queue/a delivered", points[:1], ("q0",), dashed=True),
    ]
    svg = time_lines("Rates", series, y_title="messages / s")
    assert [_title(m) for m in _marks(svg)] == ["p0", "p1", "p2", "q0"]
    assert "02:36:00" in svg and "stroke-dasharray" in svg


def test_charts_without_data_say_so() -> None:
    for svg in (
        bar_chart("x", []),
        time_lines("x", [], y_title="y"),
        grouped_histogram("x", [Group("a", (0,), ("t",))], ["s"], x_title="", y_title=""),
    ):
        assert svg == empty_chart("x")
        assert "no data in this window" in svg


@pytest.mark.parametrize("width", [360, 720])
@pytest.mark.parametrize(
    ("span", "form"),
    [
        (timedelta(seconds=40), r"\d\d:\d\d:\d\d"),
        (timedelta(hours=3), r"\d\d:\d\d"),
        (timedelta(hours=30), r"(\d\d-\d\d \d\d:\d\d|\d\d-\d\d)"),
        (timedelta(days=20), r"\d\d-\d\d"),
        (timedelta(days=500), r"\d{4}-\d\d-\d\d"),
    ],
)
def test_time_axis_labels_never_overlap_and_fit_the_span(
    width: int, span: timedelta, form: str
) -> None:
    start = datetime(2026, 11, 22, 2, 20, 7, tzinfo=UTC)
    points = ((start, 1.0), (start + span, 2.0))
    svg = time_lines("Rates", [Series("/queue/a", points, ("a", "b"))], y_title="m/s", width=width)
    axis = r'<text x="([\d.]+)" y="\d+" text-anchor="middle"[^>]*>([^<]*)<'
    labels = [(float(x), text) for x, text in re.findall(axis, svg)]
    assert len(labels) >= 2, labels
    for text in (t for _, t in labels):
        assert re.fullmatch(form, text), (text, form)
    for (x1, t1), (x2, t2) in itertools.pairwise(labels):
        assert x2 - x1 >= (len(t1) + len(t2)) * 7.0 / 2, (t1, t2, x2 - x1)
    assert all(x - len(t) * 3.5 >= 0 and x + len(t) * 3.5 <= width for x, t in labels)


def test_time_ticks_fall_on_round_moments() -> None:
    start = datetime(2026, 11, 22, 2, 20, 7, tzinfo=UTC).timestamp()
    ticks_ = time_ticks(start, start + 3 * 3600, 648, UTC)
    assert all(moment % 900 == 0 for moment, _ in ticks_)
    assert ticks_[0][1] == "02:30"
