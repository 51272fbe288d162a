"""`stomp-lake audit` in-process: the list, the SQL, a run on the sample lake, bad input."""

from __future__ import annotations

import json

import pytest

from pipeline.audit.registry import all_queries
from pipeline.cli import main
from pipeline.lake import Lake
from tests.pipeline.audit.sample_lake import connections, shared_sample_lake


def test_the_list_names_every_query_and_its_parameters(capsys) -> None:
    assert main(["audit", "--list"]) == 0
    out = capsys.readouterr().out
    for query in all_queries():
        assert f"{query.name:<20} {query.description}" in out
    assert "--param bucket_seconds=60: width of a time bucket in seconds" in out


def test_show_sql_needs_no_lake(capsys) -> None:
    assert main(["audit", "late_heartbeats", "--show-sql"]) == 0
    assert "FROM heartbeats" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["audit"], "name a query"),
        (["audit", "nope", "--lake", "x"], "no audit query named 'nope'"),
        (["audit", "message_rates", "--param", "width=1", "--lake", "x"], "no parameter width"),
        (["audit", "logins"], "--lake is required"),
    ],
)
def test_bad_requests_exit_2_with_a_reason(argv, message, capsys) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory) -> Lake:
    return shared_sample_lake(tmp_path_factory)


@pytest.mark.spark
def test_a_saved_query_runs_with_its_parameters(lake, capsys) -> None:
    argv = ["audit", "failed_logins", "--lake", str(lake.root), "--master", "local[2]"]
    assert main([*argv, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    refused = {c["client_port"] for c in connections() if not c["connected"]}
    assert {r["client_port"] for r in rows} == refused

    argv = ["audit", "largest_messages", "--lake", str(lake.root), "--master", "local[2]"]
    assert main([*argv, "--param", "limit=3", "--format", "csv"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1 + 3
