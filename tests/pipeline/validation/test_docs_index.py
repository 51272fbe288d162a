"""The lake's own validation pages: a front page over every validated batch and a page per
batch with each expectation, what was expected, what was observed and sample rows."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.lake import Lake
from pipeline.validation.docs_index import batch_page_path, write_docs_index

FAILURE = {
    "suite": "sessions",
    "expectation": "expect_column_values_to_be_between(connect_latency_ms)",
    "description": "connect latency is not negative",
    "success": False,
    "unexpected_count": 2,
    "samples": [{"session_id": "s-1", "connect_latency_ms": -3.5}],
    "error": None,
}


def _record(lake: Lake, batch: str, success: bool, with_docs: bool) -> None:
    run = lake.runs_dir / batch
    run.mkdir(parents=True)
    outcomes = [
        {"suite": "frames", "expectation": "expect_column_values_to_not_be_null(session_id)",
         "success": True},
        {"suite": "sessions", "expectation": FAILURE["expectation"], "success": success},
    ]  # fmt: skip
    record = {
        "success": success,
        "evaluated": 2,
        "failed": 0 if success else 1,
        "elapsed_s": 3,
        "outcomes": outcomes,
        "failures": [] if success else [FAILURE],
    }
    (run / "validation.json").write_text(json.dumps(record))
    if with_docs:
        (lake.docs_dir / batch).mkdir(parents=True)
        (lake.docs_dir / batch / "index.html").write_text("<html></html>")


def test_front_page_lists_every_validated_batch_and_links_its_pages(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake").ensure()
    _record(lake, "b1", True, with_docs=True)
    _record(lake, "b2<x>", False, with_docs=False)
    page = write_docs_index(lake).read_text()
    assert '<a href="b1/validation.html">b1</a>' in page
    assert '<a href="b1/index.html">GX pages</a>' in page
    assert "b2&lt;x&gt;" in page and "b2<x>" not in page  # escaped
    assert page.count(">passed</td>") == 1 and page.count(">failed</td>") == 1


def test_a_batch_page_says_expected_observed_and_samples_offline(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake").ensure()
    _record(lake, "b2", False, with_docs=True)
    write_docs_index(lake)
    page = batch_page_path(lake, "b2").read_text()
    for remote in ("http:", "https:", "<script", "<link", "url("):
        assert remote not in page
    failed_at, passed_at = page.index("<h2>sessions</h2>"), page.index("<h2>frames</h2>")
    assert failed_at < passed_at  # failed suites first
    assert "connect latency is not negative" in page and "2 unexpected" in page
    assert '{&quot;session_id&quot;: &quot;s-1&quot;, &quot;connect_latency_ms&quot;: -3.5}' in page
    assert "expect_column_values_to_not_be_null(session_id)" in page and "as expected" in page
    assert '<a href="../index.html">All runs</a>' in page
