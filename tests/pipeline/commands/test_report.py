"""`stomp-lake report` in-process: writes one HTML file for the lake or a window of it."""

from __future__ import annotations

import pytest

from pipeline.cli import main
from pipeline.lake import Lake
from tests.pipeline.audit.sample_lake import shared_sample_lake

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory) -> Lake:
    return shared_sample_lake(tmp_path_factory)


def test_the_report_is_written_whole(lake, tmp_path, capsys) -> None:
    out = tmp_path / "reports" / "traffic.html"
    argv = ["report", "--lake", str(lake.root), "--out", str(out), "--master", "local[2]"]
    assert main([*argv, "--title", "Night shift", "--since", "2026-11-22"]) == 0
    assert f"report: {out}" in capsys.readouterr().out
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<title>Night shift</title>" in page
    assert "traffic from 2026-11-22 00:00:00 UTC to …" in page
    assert [p.name for p in out.parent.iterdir()] == ["traffic.html"]


def test_bad_arguments(lake, tmp_path, capsys) -> None:
    out = tmp_path / "r.html"
    assert main(["report", "--lake", str(tmp_path / "absent"), "--out", str(out)]) == 1
    argv = ["report", "--lake", str(lake.root), "--out", str(out)]
    assert main([*argv, "--since", "2026-11-23", "--until", "2026-11-22"]) == 2
    assert "not before" in capsys.readouterr().err
    assert not out.exists()
