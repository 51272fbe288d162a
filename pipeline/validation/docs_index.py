"""The lake's Data Docs front page: one line per validated batch, newest first.

GX builds each batch's Data Docs in ``<lake>/docs/<batch_id>/`` from an ephemeral context (which
only knows that run); this page ties the runs together from their ``validation.json`` records.
"""

from __future__ import annotations

import html
from pathlib import Path

from pipeline.lake.layout import Lake
from pipeline.lake.statefile import read_json

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>stomp-lake validation runs</title>
<style>body{{font-family:sans-serif;margin:2em}}td,th{{padding:.2em .8em;text-align:left}}
.fail{{color:#b00}}.ok{{color:#070}}</style></head>
<body><h1>stomp-lake validation runs</h1>
<table><tr><th>batch</th><th>result</th><th>expectations</th><th>failed</th><th>seconds</th></tr>
{rows}
</table></body></html>
"""


def write_docs_index(lake: Lake) -> Path:
    rows = []
    runs = sorted(lake.runs_dir.glob("*/validation.json"), key=_mtime, reverse=True)
    for record_path in runs:
        record = read_json(record_path) or {}
        batch = record_path.parent.name
        ok = bool(record.get("success"))
        link = f"{batch}/index.html"
        shown = html.escape(batch)
        cell = f'<a href="{html.escape(link)}">{shown}</a>'
        if not (lake.docs_dir / link).is_file():
            cell = shown
        rows.append(
            f"<tr><td>{cell}</td><td class={'ok' if ok else 'fail'}>"
            f"{'passed' if ok else 'failed'}</td><td>{record.get('evaluated', '')}</td>"
            f"<td>{record.get('failed', '')}</td><td>{record.get('elapsed_s', '')}</td></tr>"
        )
    index = lake.docs_dir / "index.html"
    index.write_text(PAGE.format(rows="\n".join(rows)), encoding="utf-8")
    return index


def _mtime(path: Path) -> float:
    return path.stat().st_mtime
