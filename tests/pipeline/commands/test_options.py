"""The options every command shares: parsed by real parsers, their defaults taken from a real
(test-owned) environment."""

from __future__ import annotations

import argparse
import os
import re
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.commands.options import (
    DRIVER_MEMORY_VARIABLE,
    INPUT_VARIABLE,
    LAKE_VARIABLE,
    MASTER_VARIABLE,
    SETTINGS,
    TLS_KEYLOG_VARIABLE,
    VALIDATION_ENGINE_VARIABLE,
    add_inputs,
    add_lake,
    add_spark,
    add_tls_keylog,
    add_verbosity,
    env_default,
    spark_settings,
    verbosity,
    version,
)
from pipeline.spark.session import (
    DEFAULT_DRIVER_MEMORY,
    DEFAULT_MASTER,
    WORK_VARIABLE,
    SparkSettings,
)
from tests.support.paths import REPO

VARIABLES = (
    LAKE_VARIABLE,
    INPUT_VARIABLE,
    TLS_KEYLOG_VARIABLE,
    MASTER_VARIABLE,
    DRIVER_MEMORY_VARIABLE,
    VALIDATION_ENGINE_VARIABLE,
    WORK_VARIABLE,
)


@pytest.fixture(autouse=True)
def no_settings_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in VARIABLES:
        monkeypatch.delenv(variable, raising=False)


def _parser(*adders: Callable[..., None], **options: bool) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stomp-lake test")
    for add in adders:
        add(parser, **options)
    return parser


def _refused(
    parser: argparse.ArgumentParser, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> str:
    with pytest.raises(SystemExit) as stopped:
        parser.parse_args(argv)
    assert stopped.value.code == 2
    return capsys.readouterr().err


# --- the environment -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "default"), [(None, None), ("", None), ("  \t", None), (" /l ", "/l")]
)
def test_env_default_is_the_stripped_value_or_none(
    monkeypatch: pytest.MonkeyPatch, value: str | None, default: str | None
) -> None:
    if value is not None:
        monkeypatch.setenv(LAKE_VARIABLE, value)
    assert env_default(LAKE_VARIABLE) == default


# --- verbosity -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "level"),
    [([], 0), (["-q"], -1), (["--quiet"], -1), (["-v"], 1), (["-vv"], 2), (["-v", "--verbose"], 2)],
)
def test_verbosity_levels(argv: list[str], level: int) -> None:
    assert verbosity(_parser(add_verbosity).parse_args(argv)) == level


def test_quiet_and_verbose_together_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    error = _refused(_parser(add_verbosity), ["-q", "-v"], capsys)
    assert "not allowed with argument" in error


def test_a_command_without_verbosity_options_is_at_the_default_level() -> None:
    assert verbosity(argparse.Namespace()) == 0


# --- --lake --------------------------------------------------------------------------------------


def test_lake_is_required_without_the_variable(capsys: pytest.CaptureFixture[str]) -> None:
    error = _refused(_parser(add_lake), [], capsys)
    assert "the following arguments are required: --lake" in error
    assert _parser(add_lake).parse_args(["--lake", "L"]).lake == Path("L")


def test_lake_comes_from_the_variable_and_the_command_line_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(LAKE_VARIABLE, "/from/env")
    assert _parser(add_lake).parse_args([]).lake == Path("/from/env")
    assert _parser(add_lake).parse_args(["--lake", "/cli"]).lake == Path("/cli")


def test_an_optional_lake_is_none_when_not_given() -> None:
    assert _parser(add_lake, required=False).parse_args([]).lake is None


# --- --input -------------------------------------------------------------------------------------


def test_inputs_take_several_paths(capsys: pytest.CaptureFixture[str]) -> None:
    args = _parser(add_inputs).parse_args(["--input", "a.pcap", "dir"])
    assert args.input == [Path("a.pcap"), Path("dir")]
    assert "the following arguments are required: --input" in _refused(
        _parser(add_inputs), [], capsys
    )


def test_inputs_from_the_variable_are_split_on_the_path_separator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(INPUT_VARIABLE, os.pathsep.join(["/a", "", "/b c", ""]))
    assert _parser(add_inputs).parse_args([]).input == [Path("/a"), Path("/b c")]
    assert _parser(add_inputs).parse_args(["--input", "x"]).input == [Path("x")]


# --- --tls-keylog --------------------------------------------------------------------------------


def test_key_logs_are_repeatable_and_none_by_default() -> None:
    parser = _parser(add_tls_keylog)
    assert parser.parse_args([]).tls_keylog == []
    both = parser.parse_args(["--tls-keylog", "a.keys", "--tls-keylog", "folder"])
    assert both.tls_keylog == [Path("a.keys"), Path("folder")]
    assert parser.parse_args([]).tls_keylog == []  # the default list is not appended to


def test_key_logs_come_from_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TLS_KEYLOG_VARIABLE, os.pathsep.join(["/k/one", "/k/two"]))
    assert _parser(add_tls_keylog).parse_args([]).tls_keylog == [Path("/k/one"), Path("/k/two")]


def test_key_logs_on_the_command_line_win_over_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(TLS_KEYLOG_VARIABLE, "/from/env.keys")
    args = _parser(add_tls_keylog).parse_args(["--tls-keylog", "cli.keys"])
    assert args.tls_keylog == [Path("cli.keys")]


# --- Spark ---------------------------------------------------------------------------------------


def test_spark_defaults_without_the_variables() -> None:
    args = _parser(add_spark).parse_args([])
    assert (args.master, args.driver_memory, args.conf) == (
        DEFAULT_MASTER,
        DEFAULT_DRIVER_MEMORY,
        [],
    )


def test_spark_settings_come_from_the_variables_and_the_command_line_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(MASTER_VARIABLE, "spark://m:7077")
    monkeypatch.setenv(DRIVER_MEMORY_VARIABLE, "6g")
    args = _parser(add_spark).parse_args([])
    assert (args.master, args.driver_memory) == ("spark://m:7077", "6g")
    args = _parser(add_spark).parse_args(["--master", "local[2]", "--driver-memory", "1g"])
    assert (args.master, args.driver_memory) == ("local[2]", "1g")


@pytest.mark.parametrize(
    ("text", "pair"),
    [
        ("spark.sql.shuffle.partitions=4", ("spark.sql.shuffle.partitions", "4")),
        (" spark.a = b", ("spark.a", " b")),  # the key is stripped, the value kept as given
        ("spark.b=x=y", ("spark.b", "x=y")),  # only the first '=' splits
        ("spark.c=", ("spark.c", "")),
    ],
)
def test_conf_takes_key_value(text: str, pair: tuple[str, str]) -> None:
    assert _parser(add_spark).parse_args(["--conf", text]).conf == [pair]


@pytest.mark.parametrize("text", ["no-equals-sign", "=value", "  =value"])
def test_conf_without_a_key_is_refused(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    error = _refused(_parser(add_spark), ["--conf", text], capsys)
    assert f"expected KEY=VALUE, got {text!r}" in error


def test_spark_settings_gather_the_parsed_options() -> None:
    parser = _parser(add_spark, add_verbosity)
    args = parser.parse_args(
        ["--master", "local[3]", "--driver-memory", "3g", "-v"]
        + ["--conf", "spark.a=1", "--conf", "spark.b=2", "--conf", "spark.a=3"]
    )
    assert spark_settings(args) == SparkSettings(
        master="local[3]",
        driver_memory="3g",
        conf={"spark.a": "3", "spark.b": "2"},  # a repeated key: the last one given
        verbosity=1,
    )


def test_spark_settings_of_a_command_without_spark_options_are_the_defaults() -> None:
    assert spark_settings(argparse.Namespace()) == SparkSettings()


# --- help, version, the settings table -----------------------------------------------------------


@pytest.mark.parametrize(
    ("add", "variable"),
    [
        (add_lake, LAKE_VARIABLE),
        (add_inputs, INPUT_VARIABLE),
        (add_tls_keylog, TLS_KEYLOG_VARIABLE),
        (add_spark, MASTER_VARIABLE),
        (add_spark, DRIVER_MEMORY_VARIABLE),
    ],
)
def test_help_names_the_variable_behind_each_default(
    add: Callable[[argparse.ArgumentParser], None], variable: str
) -> None:
    assert f"${variable}" in _parser(add).format_help()


def test_version_is_the_installed_package_s() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert version() == project["version"]


def _readme_settings() -> list[tuple[str, str]]:
    """(option, variable) of each row of README's Settings table: the option's first word."""
    text = (REPO / "README.md").read_text()
    table = text.split("### Settings", 1)[1].split("\n\n")[2]
    rows = []
    for line in table.splitlines()[2:]:
        option, variable = [cell.strip() for cell in line.strip("|").split("|")][:2]
        first = re.findall(r"`([^`]*)`", option)
        named = re.findall(r"`([^`]*)`", variable)
        rows.append((first[0].split()[0] if first else "", named[0] if named else ""))
    return rows


def _settings_rows() -> list[tuple[str, str]]:
    return [(option.split()[0] if option else "", variable) for option, variable, _ in SETTINGS]


def test_every_settings_row_is_a_row_of_the_readme_s_table() -> None:
    readme = _readme_settings()
    assert ("--lake", LAKE_VARIABLE) in readme  # the table was found
    assert [row for row in _settings_rows() if row not in readme] == []


def test_settings_lists_the_readme_s_rows_of_these_options_in_order() -> None:
    shared = _parser(add_lake, add_inputs, add_tls_keylog, add_spark, add_verbosity)
    options = {flag for action in shared._actions for flag in action.option_strings}
    options.add("--validation-engine")  # its variable is defined here, cli.py adds the option
    readme = [
        (option, variable)
        for option, variable in _readme_settings()
        if option in options or variable in VARIABLES
    ]
    assert _settings_rows() == readme
