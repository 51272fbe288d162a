"""Where the DAGs find their configuration: Airflow Variable, then environment, then default.

Each setting `x` is read from the Variable `stomp_lake_x`, else the environment variable
`STOMP_LAKE_X`, else its default. The Spark master comes first from the Airflow Connection
`stomp_lake_spark` when it is defined. Only tasks resolve settings (at run time), never DAG
parsing, except the schedules and retry counts, which Airflow needs at parse time and so come
from the environment only.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

Lookup = Callable[[str], str | None]

SPARK_CONN_ID = "stomp_lake_spark"
DEFAULT_SPARK_PORT = 7077
INGEST_MODES = ("interval", "pending")
RETENTION_ACTIONS = ("keep", "delete", "move")


class SettingsError(ValueError):
    """A setting is missing or malformed; the message says which and how to set it."""


@dataclass(frozen=True, slots=True)
class Settings:
    capture_dir: Path
    lake: Path
    spark_master: str
    stomp_lake_bin: Path
    ingest_mode: str
    run_extra_args: tuple[str, ...]
    wait_lock_seconds: float
    compact_target_mb: int
    vacuum_retention_hours: int
    state_expiry_days: float
    capture_retention_days: float
    capture_retention_action: str
    capture_archive_dir: Path | None
    failpoint_file: Path | None = None


def variable_name(key: str) -> str:
    return f"stomp_lake_{key}"


def env_name(key: str) -> str:
    return f"STOMP_LAKE_{key.upper()}"


def env_lookup(environ: Mapping[str, str] | None = None) -> Lookup:
    source = os.environ if environ is None else environ

    def lookup(key: str) -> str | None:
        return source.get(env_name(key)) or None

    return lookup


def chained(*lookups: Lookup) -> Lookup:
    def lookup(key: str) -> str | None:
        for candidate in lookups:
            value = candidate(key)
            if value not in (None, ""):
                return value
        return None

    return lookup


def schedule_from_env(
    key: str = "ingest_schedule", default: str = "@hourly", environ: Mapping[str, str] | None = None
) -> str:
    """A DAG's schedule (cron or preset), e.g. from `STOMP_LAKE_INGEST_SCHEDULE`."""
    return env_lookup(environ)(key) or default


def retries_from_env(default: int, environ: Mapping[str, str] | None = None) -> int:
    """Task retries (parse time, so environment only): `STOMP_LAKE_TASK_RETRIES`."""
    value = env_lookup(environ)("task_retries")
    return int(value) if value is not None and value.isdigit() else default


def retry_delay_from_env(default_seconds: float, environ: Mapping[str, str] | None = None) -> float:
    """Seconds before a task's first retry (parse time): `STOMP_LAKE_TASK_RETRY_DELAY_SECONDS`."""
    value = env_lookup(environ)("task_retry_delay_seconds")
    try:
        seconds = float(value) if value is not None else default_seconds
    except ValueError:
        return default_seconds
    return seconds if seconds >= 0 else default_seconds


def take_failpoint(settings: Settings) -> str | None:
    """The pipeline failpoint (`STOMP_LAKE_KILL_AT` value) for this ingestion attempt, once.

    For testing recovery under a real scheduler: when the `failpoint_file` setting names a file
    that exists, its content (e.g. `lake.committed`) is returned and the file removed, so the
    attempt that took it is killed there and its retry runs normally."""
    path = settings.failpoint_file
    if path is None:
        return None
    try:
        spec = path.read_text().strip()
        path.unlink()
    except FileNotFoundError:
        return None
    return spec or None


def master_from_connection(host: str | None, port: int | None) -> str:
    """The Spark master URL an Airflow Connection describes.

    `spark://master:7077` (conn type spark, host master, port 7077) and the Spark provider's form
    (host `spark://master`, port 7077) both give `spark://master:7077`; a bare host gets the
    standalone default port; `yarn`, `local[N]` and hosts with a scheme (`k8s://https://api`) are
    kept as they are, with the port appended when one is set.
    """
    host = (host or "").strip()
    if not host:
        raise SettingsError(
            f"the Airflow Connection {SPARK_CONN_ID} has no host: set it to the Spark master, "
            f"e.g. spark://HOST:{DEFAULT_SPARK_PORT}, yarn or local[*]"
        )
    if host == "yarn" or host.startswith("local"):
        return host
    if "://" in host:
        return f"{host}:{port}" if port else host
    return f"spark://{host}:{port or DEFAULT_SPARK_PORT}"


def load_settings(lookup: Lookup, spark_master: str | None = None) -> Settings:
    """The settings from `lookup`; `spark_master`, when given (from the Airflow Connection),
    wins over the `spark_master` setting."""
    reader = _Reader(lookup)
    settings = Settings(
        capture_dir=reader.path("capture_dir"),
        lake=reader.path("lake"),
        spark_master=spark_master or reader.text("spark_master", "local[*]"),
        stomp_lake_bin=reader.path("bin", REPO_ROOT / ".venv" / "bin" / "stomp-lake"),
        ingest_mode=reader.choice("ingest_mode", INGEST_MODES, "interval"),
        run_extra_args=reader.arguments("run_extra_args"),
        wait_lock_seconds=reader.number("wait_lock_seconds", 600.0),
        compact_target_mb=int(reader.number("compact_target_mb", 128)),
        vacuum_retention_hours=int(reader.number("vacuum_retention_hours", 168)),
        state_expiry_days=reader.number("state_expiry_days", 7.0),
        capture_retention_days=reader.number("capture_retention_days", 30.0),
        capture_retention_action=reader.choice("capture_retention", RETENTION_ACTIONS, "keep"),
        capture_archive_dir=reader.optional_path("capture_archive_dir"),
        failpoint_file=reader.optional_path("failpoint_file"),
    )
    if settings.capture_retention_action == "move" and settings.capture_archive_dir is None:
        raise SettingsError(
            f"capture retention 'move' needs an archive folder: set the Airflow Variable "
            f"{variable_name('capture_archive_dir')} or {env_name('capture_archive_dir')}"
        )
    return settings


class _Reader:
    __slots__ = ("_lookup",)

    def __init__(self, lookup: Lookup) -> None:
        self._lookup = lookup

    def _raw(self, key: str) -> str | None:
        value = self._lookup(key)
        return None if value is None else value.strip() or None

    def _missing(self, key: str) -> SettingsError:
        return SettingsError(
            f"setting {key!r} is not configured: set the Airflow Variable {variable_name(key)} "
            f"or the environment variable {env_name(key)}"
        )

    def text(self, key: str, default: str | None = None) -> str:
        value = self._raw(key) or default
        if value is None:
            raise self._missing(key)
        return value

    def path(self, key: str, default: Path | None = None) -> Path:
        value = self.optional_path(key)
        if value is None:
            if default is None:
                raise self._missing(key)
            return default
        return value

    def optional_path(self, key: str) -> Path | None:
        value = self._raw(key)
        if value is None:
            return None
        path = Path(value).expanduser()
        if not path.is_absolute():  # tasks run in a temporary folder: relative means nothing
            raise SettingsError(f"setting {key!r} must be an absolute path, got {value!r}")
        return path

    def number(self, key: str, default: float) -> float:
        value = self._raw(key)
        if value is None:
            return default
        try:
            number = float(value)
        except ValueError:
            raise SettingsError(f"setting {key!r} must be a number, got {value!r}") from None
        if number < 0:
            raise SettingsError(f"setting {key!r} must be >= 0, got {value!r}")
        return number

    def arguments(self, key: str) -> tuple[str, ...]:
        value = self._raw(key)
        try:
            return tuple(shlex.split(value)) if value else ()
        except ValueError as error:
            raise SettingsError(f"setting {key!r}: cannot split {value!r}: {error}") from None

    def choice(self, key: str, choices: tuple[str, ...], default: str) -> str:
        value = self._raw(key) or default
        if value not in choices:
            raise SettingsError(
                f"setting {key!r} must be one of {', '.join(choices)}; got {value!r}"
            )
        return value
