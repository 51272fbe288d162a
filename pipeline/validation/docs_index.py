"""The lake's validation pages, readable offline: one page per validated batch and a front page
with one line per batch, newest first.

GX builds each batch's Data Docs in ``<lake>/docs/<batch_id>/`` from an ephemeral context (which
only knows that run); those pages take their styling and filters from the internet, so offline
they show little. The project's own pages here are self-contained (inline style, no script) and
carry what an operator needs: for each suite, each expectation with what was expected and what
was observed, and sample rows of a failed one. They are made from the runs' ``validation.json``
records; GX's pages stay linked as the secondary view.
"""

from __future__ import annotations

import html
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from pipeline.lake.layout import Lake
from pipeline.lake.statefile import read_json

BATCH_PAGE = "validation.html"
STYLE = (
    "body{font-family:sans-serif;margin:2em;color:#222}td,th{padding:.2em .8em;text-align:left;"
    "vertical-align:top;border-bottom:1px solid #e5e5e5}th{background:#f4f4f4}"
    "table{border-collapse:collapse;margin-bottom:1.2em}.fail{color:#b00}.ok{color:#070}"
    "pre{margin:0;white-space:pre-wrap;font-size:.85em}"
    "@media print{tr{break-inside:avoid}thead{display:table-header-group}}"
)
PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>stomp-lake validation runs</title>
<style>{style}</style></head>
<body><h1>stomp-lake validation runs</h1>
<table><thead><tr><th>batch</th><th>result</th><th>expectations</th><th>failed</th>
<th>seconds</th><th>Great Expectations' Data Docs</th></tr></thead><tbody>
{rows}
</tbody></table></body></html>
"""


def write_docs_index(lake: Lake) -> Path:
    """The front page, and each batch's own page (made again from its record)."""
    rows = []
    runs = sorted(lake.runs_dir.glob("*/validation.json"), key=_mtime, reverse=True)
    for record_path in runs:
        record = read_json(record_path) or {}
        batch = record_path.parent.name
        ok = bool(record.get("success"))
        shown = html.escape(batch)
        page = write_batch_page(lake, batch, record)
        cell = f'<a href="{html.escape(page.relative_to(lake.docs_dir).as_posix())}">{shown}</a>'
        gx = f"{batch}/index.html"
        gx_cell = (
            f'<a href="{html.escape(gx)}">GX pages</a>' if (lake.docs_dir / gx).is_file() else ""
        )
        rows.append(
            f"<tr><td>{cell}</td><td class={'ok' if ok else 'fail'}>"
            f"{'passed' if ok else 'failed'}</td><td>{record.get('evaluated', '')}</td>"
            f"<td>{record.get('failed', '')}</td><td>{record.get('elapsed_s', '')}</td>"
            f"<td>{gx_cell}</td></tr>"
        )
    index = lake.docs_dir / "index.html"
    index.parent.mkdir(parents=True, exist_ok=True)
    index.write_text(PAGE.format(style=STYLE, rows="\n".join(rows)), encoding="utf-8")
    return index


def batch_page_path(lake: Lake, batch: str) -> Path:
    return lake.docs_dir / batch / BATCH_PAGE


def write_batch_page(lake: Lake, batch: str, record: dict[str, Any]) -> Path:
    """One batch's results: a table per suite, expectation by expectation."""
    failures = defaultdict(list)
    for failure in record.get("failures") or []:
        failures[(failure.get("suite"), failure.get("expectation"))].append(failure)
    suites: dict[str, list[str]] = defaultdict(list)
    for outcome in record.get("outcomes") or []:
        suite, expectation = outcome.get("suite"), outcome.get("expectation")
        details = failures.get((suite, expectation)) or [{}]
        for detail in details:
            suites[str(suite)].append(_expectation_row(expectation, outcome, detail))
    ok = bool(record.get("success"))
    parts = [
        f"<h1>Validation of batch {html.escape(batch)}</h1>",
        f"<p class={'ok' if ok else 'fail'}>{'passed' if ok else 'failed'}: "
        f"{record.get('failed', 0)} of {record.get('evaluated', 0)} expectations failed, in "
        f"{record.get('elapsed_s', '?')} s.",
    ]
    if record.get("quarantine_path"):
        parts.append(f" Quarantined: {html.escape(str(record['quarantine_path']))}.")
    parts.append(' <a href="../index.html">All runs</a>.')
    if (lake.docs_dir / batch / "index.html").is_file():
        parts.append(' <a href="index.html">Great Expectations\' Data Docs</a> (secondary).')
    parts.append("</p>")
    passed = {name: all('class="ok"' in row for row in rows) for name, rows in suites.items()}
    for suite in sorted(suites, key=lambda name: (passed[name], name)):  # failed suites first
        parts.append(
            f"<h2>{html.escape(suite)}</h2><table><thead><tr><th>expectation</th>"
            "<th>expected</th><th>observed</th><th>sample rows</th></tr></thead><tbody>"
            + "".join(suites[suite])
            + "</tbody></table>"
        )
    page = batch_page_path(lake, batch)
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(
        f'<!doctype html><html><head><meta charset="utf-8"><title>validation {html.escape(batch)}'
        f"</title><style>{STYLE}</style></head><body>{''.join(parts)}</body></html>\n",
        encoding="utf-8",
    )
    return page


def _expectation_row(expectation: Any, outcome: dict[str, Any], detail: dict[str, Any]) -> str:
    success = bool(outcome.get("success"))
    if success:
        observed = '<span class="ok">as expected</span>'
    else:
        count = detail.get("unexpected_count")
        error = detail.get("error")
        text = f"{count} unexpected" if count is not None else "failed"
        observed = f'<span class="fail">{html.escape(text)}</span>'
        if error:
            observed += f"<br>error: {html.escape(str(error))}"
    samples = "".join(
        f"<pre>{html.escape(json.dumps(row, default=str))}</pre>"
        for row in detail.get("samples") or []
    )
    return (
        f"<tr><td>{html.escape(str(expectation))}</td>"
        f"<td>{html.escape(str(detail.get('description') or ''))}</td>"
        f"<td>{observed}</td><td>{samples}</td></tr>"
    )


def _mtime(path: Path) -> float:
    return path.stat().st_mtime
