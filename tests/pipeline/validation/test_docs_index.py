from __future__ import annotations

import json
from pathlib import Path

from pipeline.lake import Lake
from pipeline.validation.docs_index import write_docs_index


def _record(lake: Lake, batch: str, success: bool, with_docs: bool) -> None:
    run = lake.runs_dir / batch
    run.mkdir(parents=True)
    record = {"success": success, "evaluated": 170, "failed": 0 if success else 2, "elapsed_s": 3}
    (run / "validation.json").write_text(json.dumps(record))
    if with_docs:
        (lake.docs_dir / batch).mkdir(parents=True)
        (lake.docs_dir / batch / "index.html").write_text("<html></html>")


def test_front_page_lists_every_validated_batch_and_links_its_docs(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake").ensure()
    _record(lake, "b1", True, with_docs=True)
    _record(lake, "b2<x>", False, with_docs=False)
    page = write_docs_index(lake).read_text()
    assert '<a href="b1/index.html">b1</a>' in page
    assert "b2&lt;x&gt;" in page and "b2<x>" not in page  # escaped, and no link without docs
    assert page.count("passed") == 1 and page.count("failed</td>") == 1
