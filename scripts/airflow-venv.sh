#!/usr/bin/env bash
# Create the Airflow virtual environment `.venv-airflow` (kept apart from the pipeline's `.venv`,
# so Airflow never sits beside pyspark), idempotently, and print its path.
# A stamp holding the lock file's hash makes re-runs instant until the lock changes.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${AIRFLOW_VENV:-$repo/.venv-airflow}"
lock="$repo/requirements-airflow.txt"
python="${PYTHON:-python3}"
stamp="$venv/.stomp-lake-stamp"

if [[ -f "$lock" ]]; then
    want="$(sha256sum "$lock" | cut -d' ' -f1)"
else
    want="unlocked"
fi

# one maker at a time (parallel test workers ask for it at once); the others then find it made
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9

if [[ -x "$venv/bin/airflow" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "$venv"
    exit 0
fi

{
    "$python" -m venv "$venv"
    "$venv/bin/pip" install -q --upgrade pip
    if [[ -f "$lock" ]]; then
        "$venv/bin/pip" install -q -r "$lock"
    else
        "$venv/bin/pip" install -q "apache-airflow==3.3.*"
    fi
} >&2
echo "$want" >"$stamp"
echo "$venv"
