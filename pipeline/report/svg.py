"""Inline SVG charts: horizontal bars, histograms and time lines, each mark with a `<title>`
tooltip giving its numbers. No script, no external resource: the page works offline."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from html import escape

# Okabe-Ito: told apart by most colour-blind readers.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#999999")
FONT = 'font-family="system-ui, sans-serif" font-size="12"'
AXIS = "#555"
GRID = "#e3e3e3"


@dataclass(frozen=True, slots=True)
class Bar:
    label: str
    value: float
    tooltip: str


@dataclass(frozen=True, slots=True)
class Group:
    """One category of a grouped histogram: a value per series."""

    label: str
    values: tuple[float, ...]
    tooltips: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    points: tuple[tuple[datetime, float], ...]
    tooltips: tuple[str, ...]
    color: str = PALETTE[0]
    dashed: bool = False


def ticks(maximum: float, count: int = 4, *, integer: bool = False) -> list[float]:
    """Round tick values from 0 to at least `maximum`, about `count` steps of 1, 2, 2.5 or 5
    x 10^k (whole steps only when `integer`)."""
    if maximum <= 0:
        return [0.0, 1.0]
    raw = maximum / count
    scale = 10 ** math.floor(math.log10(raw))
    step = next(m * scale for m in (1, 2, 2.5, 5, 10) if m * scale >= raw * (1 - 1e-9))
    if integer:
        step = max(1.0, float(math.ceil(step)))
    steps = math.ceil(maximum / step - 1e-9)
    return [step * i for i in range(steps + 1)]


def number(value: float) -> str:
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _svg(width: int, height: int, label: str, body: list[str]) -> str:
    return (
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="{escape(label)}" {FONT}>'
        f"<title>{escape(label)}</title>" + "".join(body) + "</svg>"
    )


def empty_chart(label: str, message: str = "no data in this window") -> str:
    body = [
        f'<text x="210" y="60" text-anchor="middle" fill="{AXIS}">{escape(message)}</text>',
    ]
    return _svg(420, 110, label, body)


def bar_chart(
    label: str, bars: Sequence[Bar], *, unit: str = "", integer: bool = True, width: int = 560
) -> str:
    """Horizontal bars, one per row, largest scale first as given."""
    if not bars:
        return empty_chart(label)
    row, top, left, right = 26, 10, 190, 70
    height = top + row * len(bars) + 30
    span = width - left - right
    scale = ticks(max(b.value for b in bars), integer=integer)
    maximum = scale[-1]
    body: list[str] = []
    for tick in scale:
        x = left + span * tick / maximum
        body.append(
            f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{height - 24}" stroke="{GRID}"/>'
            f'<text x="{x:.1f}" y="{height - 8}" text-anchor="middle" fill="{AXIS}">'
            f"{number(tick)}</text>"
        )
    for i, bar in enumerate(bars):
        y = top + i * row
        length = span * bar.value / maximum
        body.append(
            f'<text x="{left - 8}" y="{y + 16}" text-anchor="end">{escape(_clip(bar.label))}</text>'
            f'<rect class="mark" x="{left}" y="{y + 4}" width="{max(length, 1):.1f}" '
            f'height="{row - 8}" fill="{PALETTE[0]}"><title>{escape(bar.tooltip)}</title></rect>'
            f'<text x="{left + length + 6:.1f}" y="{y + 16}" fill="{AXIS}">'
            f"{escape(number(bar.value) + unit)}</text>"
        )
    return _svg(width, height, label, body)


def grouped_histogram(
    label: str,
    groups: Sequence[Group],
    series_names: Sequence[str],
    *,
    x_title: str,
    y_title: str,
    width: int = 560,
    height: int = 300,
) -> str:
    """Vertical bars per category, one bar per series side by side, with a legend."""
    if not groups or not any(v for g in groups for v in g.values):
        return empty_chart(label)
    left, right, top, bottom = 56, 12, 28, 58
    plot_w, plot_h = width - left - right, height - top - bottom
    scale = ticks(max(v for g in groups for v in g.values), integer=True)
    maximum = scale[-1]
    body = _y_axis(scale, left, top, plot_w, plot_h, y_title)
    slot = plot_w / len(groups)
    bar_w = slot * 0.8 / len(series_names)
    for i, group in enumerate(groups):
        x0 = left + i * slot + slot * 0.1
        for j, value in enumerate(group.values):
            h = plot_h * value / maximum
            body.append(
                f'<rect class="mark" x="{x0 + j * bar_w:.1f}" y="{top + plot_h - h:.1f}" '
                f'width="{bar_w - 1:.1f}" height="{max(h, 0.5):.1f}" fill="{PALETTE[j]}">'
                f"<title>{escape(group.tooltips[j])}</title></rect>"
            )
        body.append(
            f'<text x="{left + (i + 0.5) * slot:.1f}" y="{top + plot_h + 16}" '
            f'text-anchor="middle">{escape(group.label)}</text>'
        )
    body.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 22}" text-anchor="middle" '
        f'fill="{AXIS}">{escape(x_title)}</text>'
    )
    if len(series_names) > 1:
        body += _legend([(n, PALETTE[j], False) for j, n in enumerate(series_names)], left, 6)
    return _svg(width, height, label, body)


def time_lines(
    label: str,
    series: Sequence[Series],
    *,
    y_title: str,
    width: int = 720,
    height: int = 340,
) -> str:
    """Lines over time with a marker per point; the x axis spans every point of every series."""
    points = [p for s in series for p in s.points]
    if not points:
        return empty_chart(label)
    left, right, top = 56, 16, 16
    legend_rows = math.ceil(len(series) / 3)
    bottom = 44 + 18 * legend_rows
    plot_w, plot_h = width - left - right, height - top - bottom
    start = min(t for t, _ in points).timestamp()
    end = max(t for t, _ in points).timestamp()
    spread = max(end - start, 1e-9)
    scale = ticks(max(v for _, v in points))
    maximum = scale[-1]
    body = _y_axis(scale, left, top, plot_w, plot_h, y_title)
    for moment, text in time_ticks(start, end, plot_w, points[0][0].tzinfo):
        x = left + plot_w * ((moment - start) / spread if end > start else 0.5)
        half = _label_px(text) / 2
        if x - half < 0 or x + half > width:
            continue  # a label cut by the chart's edge would be misread
        body.append(
            f'<line x1="{x:.1f}" y1="{top + plot_h}" x2="{x:.1f}" y2="{top + plot_h + 4}" '
            f'stroke="{AXIS}"/>'
            f'<text x="{x:.1f}" y="{top + plot_h + 16}" text-anchor="middle" fill="{AXIS}">'
            f"{escape(text)}</text>"
        )

    def xy(moment: datetime, value: float) -> tuple[float, float]:
        x = left + plot_w * ((moment.timestamp() - start) / spread if end > start else 0.5)
        return x, top + plot_h - plot_h * value / maximum

    for line in series:
        coords = [xy(t, v) for t, v in line.points]
        dash = ' stroke-dasharray="5 3"' if line.dashed else ""
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
        body.append(
            f'<polyline points="{path}" fill="none" stroke="{line.color}" stroke-width="1.8"'
            f"{dash}/>"
        )
        for (x, y), tip in zip(coords, line.tooltips, strict=True):
            body.append(
                f'<circle class="mark" cx="{x:.1f}" cy="{y:.1f}" r="3.2" fill="{line.color}">'
                f"<title>{escape(tip)}</title></circle>"
            )
    items = [(s.name, s.color, s.dashed) for s in series]
    body += _legend(items, left, top + plot_h + 30, per_row=3, column=(plot_w // 3))
    return _svg(width, height, label, body)


def _y_axis(
    scale: list[float], left: int, top: int, plot_w: int, plot_h: int, title: str
) -> list[str]:
    body = []
    for tick in scale:
        y = top + plot_h - plot_h * tick / scale[-1]
        body.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="{GRID}"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="{AXIS}">'
            f"{number(tick)}</text>"
        )
    body.append(
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        f'stroke="{AXIS}"/>'
        f'<text transform="translate(14 {top + plot_h / 2:.1f}) rotate(-90)" '
        f'text-anchor="middle" fill="{AXIS}">{escape(title)}</text>'
    )
    return body


def _legend(
    items: list[tuple[str, str, bool]], x: int, y: int, *, per_row: int = 4, column: int = 130
) -> list[str]:
    body = []
    for i, (name, color, dashed) in enumerate(items):
        cx = x + (i % per_row) * column
        cy = y + (i // per_row) * 18
        dash = ' stroke-dasharray="5 3"' if dashed else ""
        body.append(
            f'<line x1="{cx}" y1="{cy + 6}" x2="{cx + 18}" y2="{cy + 6}" stroke="{color}" '
            f'stroke-width="3"{dash}/>'
            f'<text x="{cx + 24}" y="{cy + 10}">{escape(_clip(name, 28))}</text>'
        )
    return body


# Steps a time axis may take, in seconds: round values of each unit up to four weeks.
TIME_STEPS = (
    1, 2, 5, 10, 15, 30,
    60, 120, 300, 600, 900, 1800,
    3600, 7200, 10800, 21600, 43200,
    86400, 2 * 86400, 7 * 86400, 14 * 86400, 28 * 86400,
)  # fmt: skip
_CHAR_PX = 7.0  # an upper bound for a digit of the 12 px sans-serif font
_LABEL_GAP_PX = 12


def time_ticks(
    start: float, end: float, plot_w: float, tz: tzinfo | None
) -> list[tuple[float, str]]:
    """Ticks (epoch seconds, label) for a time axis from `start` to `end` drawn `plot_w` pixels
    wide: the smallest round step whose labels do not overlap, ticks on whole multiples of it in
    `tz`, labels as precise as the step and dated when the span crosses a day."""
    spread = end - start
    if spread <= 0:
        return [(start, _when(start, tz).strftime("%H:%M:%S"))]
    offset = (_when(start, tz).utcoffset() or timedelta()).total_seconds()
    for step in TIME_STEPS:
        form = _time_format(step, _when(start, tz).date() != _when(end, tz).date(), start, end, tz)
        widest = max(_label_px(_when(m, tz).strftime(form)) for m in (start, end))
        if plot_w * step / spread >= widest + _LABEL_GAP_PX or step == TIME_STEPS[-1]:
            break
    first = math.ceil((start + offset) / step) * step - offset
    stride = max(1, math.ceil((widest + _LABEL_GAP_PX) * spread / (plot_w * step)))
    moments = [first + i * step for i in range(0, int((end - first) // step) + 1, stride)]
    return [(m, _when(m, tz).strftime(form)) for m in moments]


def _time_format(step: int, crosses_days: bool, start: float, end: float, tz: tzinfo | None) -> str:
    if step >= 86400:
        return "%Y-%m-%d" if _when(start, tz).year != _when(end, tz).year else "%m-%d"
    clock = "%H:%M:%S" if step < 60 else "%H:%M"
    return f"%m-%d {clock}" if crosses_days else clock


def _when(moment: float, tz: tzinfo | None) -> datetime:
    return datetime.fromtimestamp(moment, tz=tz)


def _label_px(text: str) -> float:
    return len(text) * _CHAR_PX


def _clip(text: str, size: int = 26) -> str:
    return text if len(text) <= size else text[: size - 1] + "…"
