"""Settings as the real Airflow resolves them (its secrets backends read Connections and
Variables from AIRFLOW_CONN_* / AIRFLOW_VAR_* here), in the Airflow venv."""

from __future__ import annotations

import json
from pathlib import Path

from tests.dags.airflow_runner import probe

BASE = {"STOMP_LAKE_CAPTURE_DIR": "/data/captures", "STOMP_LAKE_LAKE": "/data/lake"}
OVERRIDDEN = {"AIRFLOW_VAR_STOMP_LAKE_SPARK_MASTER": "local[3]", "STOMP_LAKE_SPARK_MASTER": "x"}
CASES = [  # (environment, Spark master resolved)
    ({"AIRFLOW_CONN_STOMP_LAKE_SPARK": "spark://spark-master.example:7077", **OVERRIDDEN},
     "spark://spark-master.example:7077"),
    ({"AIRFLOW_CONN_STOMP_LAKE_SPARK": '{"conn_type": "spark", "host": "spark://10.1.2.3", '
      '"port": 7078}', **OVERRIDDEN},
     "spark://10.1.2.3:7078"),
    ({"AIRFLOW_CONN_STOMP_LAKE_SPARK": '{"conn_type": "generic", "host": "yarn"}'}, "yarn"),
    ({"AIRFLOW_VAR_STOMP_LAKE_SPARK_MASTER": "local[3]", "STOMP_LAKE_SPARK_MASTER": "x"},
     "local[3]"),
    ({"STOMP_LAKE_SPARK_MASTER": "spark://from-env:7077"}, "spark://from-env:7077"),
    ({}, "local[*]"),
]  # fmt: skip


def test_spark_master_from_connection_then_variable_then_environment(
    airflow_venv: Path, airflow_home: Path
) -> None:
    cases = [{**BASE, **env} for env, _ in CASES]
    resolved = probe(airflow_venv, airflow_home, ["settings", json.dumps(cases)])
    assert [r["spark_master"] for r in resolved] == [master for _, master in CASES]
    assert {r["lake"] for r in resolved} == {"/data/lake"}
