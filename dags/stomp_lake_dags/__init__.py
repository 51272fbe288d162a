"""Helpers for the stomp-lake DAGs: settings, capture discovery, command lines, Assets.

Nothing here imports Airflow at import time (`airflow_settings` and `assets.publish_tables` do
inside the functions tasks call) nor the pipeline, so DAG parsing stays cheap and the helpers are
testable in either virtual environment. Tasks reach the pipeline only through its command line,
`stomp-lake` (`commands`).
"""
