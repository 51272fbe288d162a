"""Settings as a running task sees them: the Spark Connection, Airflow Variables, the environment.

Imported only inside tasks (it needs Airflow's task SDK at call time, never at import time).
"""

from __future__ import annotations

from stomp_lake_dags.settings import (
    SPARK_CONN_ID,
    Settings,
    SettingsError,
    chained,
    env_lookup,
    load_settings,
    master_from_connection,
    variable_name,
)


def current_settings() -> Settings:
    """The settings, or a task failure without retries: a missing or malformed setting is not
    something waiting fixes."""
    from airflow.sdk import Variable
    from airflow.sdk.exceptions import AirflowFailException

    def variable(key: str) -> str | None:
        return Variable.get(variable_name(key), default=None)

    try:
        settings = load_settings(chained(variable, env_lookup()), spark_master_from_connection())
    except SettingsError as error:
        raise AirflowFailException(str(error)) from error
    return settings


def spark_master_from_connection() -> str | None:
    """The master URL of the Airflow Connection `stomp_lake_spark`, or None when it is not
    defined (then the Variable, the environment or `local[*]` decide)."""
    from airflow.sdk import Connection
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        connection = Connection.get(SPARK_CONN_ID)
    except AirflowNotFoundException:
        return None
    master = master_from_connection(connection.host, connection.port)
    print(f"Spark master {master} from the Airflow Connection {SPARK_CONN_ID}")
    return master
