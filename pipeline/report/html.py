"""The report page: one HTML file with its style inline, each section a chart and its numbers."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

Cell = str | int | float | None


@dataclass(frozen=True, slots=True)
class Table:
    columns: tuple[str, ...]
    rows: Sequence[Sequence[Cell]]
    caption: str = ""


@dataclass(frozen=True, slots=True)
class Section:
    anchor: str
    title: str
    description: str
    chart: str  # inline <svg>, or "" for a section of tables only
    tables: Sequence[Table] = field(default_factory=tuple)


STYLE = """
body { font-family: system-ui, sans-serif; margin: 0 auto; max-width: 1400px; padding: 1rem 2rem;
       color: #222; background: #fff; }
h1 { margin-bottom: 0.2rem; }
.meta { color: #555; margin-top: 0; }
nav a { margin-right: 1rem; }
section { border-top: 1px solid #ddd; padding: 0.6rem 0 1.2rem; }
section p.about { color: #444; max-width: 60rem; }
.pair { display: flex; flex-wrap: wrap; gap: 1.5rem; align-items: flex-start; }
figure { margin: 0; }
svg.chart { max-width: 100%; height: auto; }
svg.chart .mark:hover { opacity: 0.7; stroke: #000; stroke-width: 1; }
table { border-collapse: collapse; font-size: 0.85rem; }
caption { text-align: left; font-weight: 600; padding-bottom: 0.3rem; }
th, td { border-bottom: 1px solid #e5e5e5; padding: 0.2rem 0.6rem; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f4f4f4; }
.tables { display: flex; flex-direction: column; gap: 1rem; }
.multiples { display: flex; flex-wrap: wrap; gap: 0.5rem 1rem; }
.key { font-size: 0.85rem; color: #444; }
.key .sent { border-top: 2px solid #0072B2; display: inline-block; width: 2rem; }
.key .delivered { border-top: 2px dashed #D55E00; display: inline-block; width: 2rem; }
/* Printing (or saving as PDF) keeps every row: no scroll boxes, rows never split across pages,
   table headings repeated on each page, charts kept whole. */
@page { size: A4; margin: 12mm; }
@media print {
  body { max-width: none; padding: 0; font-size: 10pt; }
  nav { display: none; }
  .pair { display: block; }
  figure, svg.chart, tr, caption, h2 { break-inside: avoid; }
  h2 { break-after: avoid; }
  thead { display: table-header-group; }
  table { margin-top: 0.6rem; }
  svg.chart { max-width: 100%; height: auto; }
}
"""

# Columns whose numbers are names, not quantities: printed without thousands separators.
_PLAIN_COLUMN = re.compile(r"(^|[\s_])(port|id|ids|seq|index|version|year)$")


def render_table(table: Table) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in table.columns)
    plain = [bool(_PLAIN_COLUMN.search(c.lower())) for c in table.columns]
    rows = []
    for row in table.rows:
        cells = "".join(
            f'<td class="num">{escape(_text(v, bare))}</td>'
            if isinstance(v, int | float) and not isinstance(v, bool)
            else f"<td>{escape(_text(v, bare))}</td>"
            for v, bare in zip(row, plain, strict=False)
        )
        rows.append(f"<tr>{cells}</tr>")
    if not rows:
        rows.append(f'<tr><td colspan="{len(table.columns)}">none</td></tr>')
    caption = f"<caption>{escape(table.caption)}</caption>" if table.caption else ""
    return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def render_section(section: Section) -> str:
    tables = "".join(render_table(t) for t in section.tables)
    figure = f"<figure>{section.chart}</figure>" if section.chart else ""
    return (
        f'<section id="{escape(section.anchor)}"><h2>{escape(section.title)}</h2>'
        f'<p class="about">{escape(section.description)}</p>'
        f'<div class="pair">{figure}<div class="tables">{tables}</div></div></section>'
    )


def render_page(title: str, meta: str, sections: Sequence[Section]) -> str:
    nav = "".join(f'<a href="#{escape(s.anchor)}">{escape(s.title)}</a>' for s in sections)
    body = "".join(render_section(s) for s in sections)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head>"
        f'<body><h1>{escape(title)}</h1><p class="meta">{escape(meta)}</p>'
        f"<nav>{nav}</nav>{body}</body></html>\n"
    )


def _text(value: Cell, plain: bool = False) -> str:
    if value is None:
        return "–"
    if plain and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".") if value != int(value) else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)
