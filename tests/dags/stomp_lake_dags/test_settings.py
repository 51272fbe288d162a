from __future__ import annotations

from pathlib import Path

import pytest
from stomp_lake_dags.settings import (
    REPO_ROOT,
    SettingsError,
    chained,
    env_lookup,
    load_settings,
    master_from_connection,
    retries_from_env,
    retry_delay_from_env,
    schedule_from_env,
    take_failpoint,
)

BASE = {"STOMP_LAKE_CAPTURE_DIR": "/data/captures", "STOMP_LAKE_LAKE": "/data/lake"}


def test_defaults_point_at_the_repo_venv() -> None:
    settings = load_settings(env_lookup(BASE))
    assert settings.capture_dir == Path("/data/captures")
    assert settings.lake == Path("/data/lake")
    assert settings.stomp_lake_bin == REPO_ROOT / ".venv" / "bin" / "stomp-lake"
    assert settings.spark_master == "local[*]"
    assert settings.ingest_mode == "interval"
    assert settings.capture_retention_action == "keep"
    assert settings.run_extra_args == ()


def test_variable_wins_over_environment() -> None:
    variables = {"spark_master": "spark://10.0.0.5:7077"}
    lookup = chained(variables.get, env_lookup({**BASE, "STOMP_LAKE_SPARK_MASTER": "local[2]"}))
    assert load_settings(lookup).spark_master == "spark://10.0.0.5:7077"


def test_master_from_the_connection_wins_over_variable_and_environment() -> None:
    variables = {"spark_master": "spark://variable:7077"}
    lookup = chained(variables.get, env_lookup({**BASE, "STOMP_LAKE_SPARK_MASTER": "local[2]"}))
    settings = load_settings(lookup, spark_master="spark://from-connection:7077")
    assert settings.spark_master == "spark://from-connection:7077"
    assert load_settings(lookup, spark_master=None).spark_master == "spark://variable:7077"


@pytest.mark.parametrize(
    ("host", "port", "master"),
    [
        ("spark-master", 7077, "spark://spark-master:7077"),  # URI spark://spark-master:7077
        ("10.0.0.5", None, "spark://10.0.0.5:7077"),  # bare host: the standalone default port
        ("spark://spark-master", 7078, "spark://spark-master:7078"),  # the Spark provider's form
        ("spark://spark-master:7077", None, "spark://spark-master:7077"),
        ("k8s://https://api.example", 6443, "k8s://https://api.example:6443"),
        ("yarn", None, "yarn"),
        ("local[2]", None, "local[2]"),
        (" local[*] ", 7077, "local[*]"),
    ],
)
def test_master_url_from_connection_host_and_port(host: str, port: int | None, master: str) -> None:
    assert master_from_connection(host, port) == master


@pytest.mark.parametrize("host", [None, "", "  "])
def test_connection_without_host_is_refused_with_its_id(host: str | None) -> None:
    with pytest.raises(SettingsError, match="stomp_lake_spark"):
        master_from_connection(host, 7077)


def test_environment_used_when_variable_missing_or_empty() -> None:
    lookup = chained({"spark_master": ""}.get, env_lookup({**BASE, "STOMP_LAKE_SPARK_MASTER": "x"}))
    assert load_settings(lookup).spark_master == "x"


def test_missing_required_setting_names_both_places() -> None:
    with pytest.raises(SettingsError) as error:
        load_settings(env_lookup({"STOMP_LAKE_LAKE": "/l"}))
    assert "stomp_lake_capture_dir" in str(error.value)
    assert "STOMP_LAKE_CAPTURE_DIR" in str(error.value)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("STOMP_LAKE_VACUUM_RETENTION_HOURS", "a week"),
        ("STOMP_LAKE_CAPTURE_RETENTION_DAYS", "-1"),
        ("STOMP_LAKE_INGEST_MODE", "everything"),
        ("STOMP_LAKE_CAPTURE_RETENTION", "shred"),
        ("STOMP_LAKE_RUN_EXTRA_ARGS", "--body 'preview:8"),
        ("STOMP_LAKE_LAKE", "relative/lake"),
        ("STOMP_LAKE_BIN", "stomp-lake"),
    ],
)
def test_malformed_settings_are_refused(key: str, value: str) -> None:
    with pytest.raises(SettingsError):
        load_settings(env_lookup({**BASE, key: value}))


def test_move_needs_an_archive_folder() -> None:
    with pytest.raises(SettingsError, match="archive"):
        load_settings(env_lookup({**BASE, "STOMP_LAKE_CAPTURE_RETENTION": "move"}))
    settings = load_settings(
        env_lookup(
            {**BASE, "STOMP_LAKE_CAPTURE_RETENTION": "move", "STOMP_LAKE_CAPTURE_ARCHIVE_DIR": "/a"}
        )
    )
    assert settings.capture_archive_dir == Path("/a")


def test_extra_run_arguments_are_split_like_a_shell() -> None:
    lookup = env_lookup({**BASE, "STOMP_LAKE_RUN_EXTRA_ARGS": "--body preview:64 --no-validate"})
    assert load_settings(lookup).run_extra_args == ("--body", "preview:64", "--no-validate")


def test_home_relative_paths_are_expanded() -> None:
    settings = load_settings(env_lookup({**BASE, "STOMP_LAKE_LAKE": "~/lake"}))
    assert settings.lake == Path("~/lake").expanduser()


def test_schedules_come_from_the_environment() -> None:
    environ = {"STOMP_LAKE_INGEST_SCHEDULE": "*/15 * * * *"}
    assert schedule_from_env("ingest_schedule", "@hourly", {}) == "@hourly"
    assert schedule_from_env("ingest_schedule", "@hourly", environ) == "*/15 * * * *"
    environ = {"STOMP_LAKE_MAINTENANCE_SCHEDULE": "30 2 * * *"}
    assert schedule_from_env("maintenance_schedule", "@daily", environ) == "30 2 * * *"


def test_retries_come_from_the_environment() -> None:
    assert retries_from_env(3, {}) == 3
    assert retries_from_env(3, {"STOMP_LAKE_TASK_RETRIES": "0"}) == 0
    assert retries_from_env(3, {"STOMP_LAKE_TASK_RETRIES": "many"}) == 3


def test_retry_delay_from_the_environment() -> None:
    assert retry_delay_from_env(60, {}) == 60
    assert retry_delay_from_env(60, {"STOMP_LAKE_TASK_RETRY_DELAY_SECONDS": "2.5"}) == 2.5
    assert retry_delay_from_env(60, {"STOMP_LAKE_TASK_RETRY_DELAY_SECONDS": "soon"}) == 60
    assert retry_delay_from_env(60, {"STOMP_LAKE_TASK_RETRY_DELAY_SECONDS": "-1"}) == 60


def test_a_failpoint_file_is_taken_once(tmp_path: Path) -> None:
    failpoint = tmp_path / "failpoint"
    settings = load_settings(env_lookup({**BASE, "STOMP_LAKE_FAILPOINT_FILE": str(failpoint)}))
    assert take_failpoint(settings) is None  # no file: no failpoint
    failpoint.write_text("lake.committed\n")
    assert take_failpoint(settings) == "lake.committed"
    assert not failpoint.exists() and take_failpoint(settings) is None
    assert take_failpoint(load_settings(env_lookup(BASE))) is None
