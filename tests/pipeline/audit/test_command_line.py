"""The options `sql`, `audit` and `report` share, and the lake check before Spark starts."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

import pytest

from pipeline.audit.command_line import (
    NoLake,
    add_lake_arguments,
    add_output_arguments,
    check_lake,
    window_from_args,
)
from pipeline.lake import Lake


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_lake_arguments(parser)
    add_output_arguments(parser)
    return parser


def test_options_parse_to_a_window_and_an_output() -> None:
    args = _parser().parse_args(
        ["--lake", "L", "--since", "2026-11-22T02:00", "--format", "csv", "--limit", "0"]
    )
    window = window_from_args(args)
    assert window.since == datetime(2026, 11, 22, 2, tzinfo=UTC) and window.until is None
    assert (args.format, args.limit, args.master) == ("csv", 0, "local[*]")


@pytest.mark.parametrize(
    "argv", [["--lake", "L", "--since", "soon"], ["--lake", "L", "--limit", "-1"], []]
)
def test_bad_options_are_refused_by_the_parser(argv) -> None:
    with pytest.raises(SystemExit):
        _parser().parse_args(argv)


def test_a_missing_lake_is_refused_and_an_empty_one_noted(tmp_path, capsys) -> None:
    with pytest.raises(NoLake, match="no lake at") as refused:
        check_lake(tmp_path / "absent")
    assert refused.value.exit_code == 1
    assert check_lake(tmp_path) == Lake(tmp_path)
    assert "holds no tables yet" in capsys.readouterr().err
